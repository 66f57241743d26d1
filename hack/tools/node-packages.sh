#!/usr/bin/env bash
# Installs what the local cluster's real node runs from Debian packages when
# it is missing: containerd, runc, iptables (kube-proxy), the CNI plugins
# (bridge, host-local, loopback, portmap) and prometheus (the real
# Prometheus of `virtop up --prometheus`, make demo's monitoring). Nothing
# is started: a policy-rc.d refuses every service start while the packages
# are installed (so on a machine with systemd neither containerd nor
# prometheus starts on the host); virtop up runs its own containerd and
# Prometheus inside the cluster's network namespace.
#
# With --kubevirt-build, what building KubeVirt's node images
# (virt-handler, virt-launcher: hack/tools/kubevirt-node.sh) needs instead:
# debootstrap (their Debian root file systems), gcc and libc6-dev (cgo for
# virt-handler's <linux/kvm.h>, virt-launcher against the root's libvirt,
# the static container-disk), pkg-config (libvirt's and libnbd's flags),
# libcap2-bin (setcap: virt-launcher-monitor's capability, as upstream's
# image carries it), cpio (the smoke guest's initramfs,
# hack/tools/smoke-guest.sh) and unshare (hack/tools/launcher-smoke.sh).
# libvirt-dev and libnbd-dev are not installed here:
# virt-launcher is linked against the Debian root's own.
#
# Usage: hack/tools/node-packages.sh [--kubevirt-build]   (root, with
# apt-get; otherwise it says what to install)
set -euo pipefail

declare -A pkg_of=([containerd]=containerd [runc]=runc [iptables]=iptables [containerd-shim-runc-v2]=containerd [prometheus]=prometheus)
what="the real node"
if [ "${1:-}" = --kubevirt-build ]; then
	pkg_of=([debootstrap]=debootstrap [gcc]=gcc [pkg-config]=pkgconf [setcap]=libcap2-bin [chroot]=coreutils [cpio]=cpio [unshare]=util-linux)
	what="building KubeVirt's node images"
elif [ $# -gt 0 ]; then
	echo "usage: hack/tools/node-packages.sh [--kubevirt-build]" >&2
	exit 2
fi
missing=()
for cmd in "${!pkg_of[@]}"; do
	command -v "$cmd" >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null || missing+=("${pkg_of[$cmd]}")
done
if [ "${what}" = "the real node" ]; then
	[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(containernetworking-plugins)
else
	[ -f /usr/include/stdio.h ] || missing+=(libc6-dev)
fi
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "node-packages: ${what} needs the Debian packages: ${pkgs}" >&2
	if [ "${what}" = "the real node" ]; then
		echo "  install them (apt-get install ${pkgs}) or run the local cluster with --real-node=false" >&2
	else
		echo "  install them (apt-get install ${pkgs})" >&2
	fi
	exit 1
fi
echo "node-packages: installing ${pkgs}(Debian; no service is started)"
# Debian's maintainer scripts start services through invoke-rc.d and
# deb-systemd-invoke, which ask /usr/sbin/policy-rc.d first: 101 means
# "not allowed". One left by someone else is kept.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\n# hack/tools/node-packages.sh: no service starts while it installs\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${pkgs}
