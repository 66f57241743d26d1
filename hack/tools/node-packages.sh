#!/usr/bin/env bash
# Installs what the local cluster's real node runs from Debian packages when
# it is missing: containerd, runc, iptables (kube-proxy) and the CNI plugins
# (bridge, host-local, loopback, portmap). Nothing is started: virtop up
# runs its own containerd inside the cluster's network namespace.
#
# Usage: hack/tools/node-packages.sh   (root, with apt-get; otherwise it says
# what to install)
set -euo pipefail

declare -A pkg_of=([containerd]=containerd [runc]=runc [iptables]=iptables [containerd-shim-runc-v2]=containerd)
missing=()
for cmd in "${!pkg_of[@]}"; do
	command -v "$cmd" >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null || missing+=("${pkg_of[$cmd]}")
done
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "node-packages: the real node needs the Debian packages: ${pkgs}" >&2
	echo "  install them (apt-get install ${pkgs}) or run the local cluster with --real-node=false" >&2
	exit 1
fi
echo "node-packages: installing ${pkgs}(Debian; no service is started)"
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${pkgs}
