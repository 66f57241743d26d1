#!/usr/bin/env bash
# Builds a tiny guest for smoke tests of the virt-launcher image, from
# Debian packages only: Debian's cloud kernel (linux-image-cloud-amd64's
# current kernel, whose serial port, ACPI power-off and initramfs support
# are built in) and an initramfs holding Debian's busybox-static and an
# /init that prints
#   virtop-guest-ok
# (and the guest's uptime) on the console and powers the machine off.
# Boot it with direct kernel boot and console=ttyS0: what a VM with no disk
# needs to show it ran (hack/tools/launcher-smoke.sh). With virtop.stay on
# the kernel's command line it stays up instead: a line
#   virtop-guest-alive <uptime>
# every 10 seconds, and a shell on the console (a KubeVirt VM's guest,
# reached with virtctl console). Nothing is downloaded when the guest is
# used.
#
# Writes <cache>/kubevirt-node-debian/guest-<kernel version>-r<recipe>/
# {vmlinuz,initrd.img,packages} and guest-image.tar, the same two files as
# a container image for KubeVirt's kernel boot (boot/vmlinuz,
# boot/initrd.img; named GUEST_IMAGE:<kernel version, + as ->), and prints that
# directory on its last line; a second run reuses it.
#
# Needs apt-get, dpkg-deb and cpio on this machine and Debian's archive
# keyring (Debian ${SUITE}'s key: debian-archive-keyring) and
# Debian's mirror at build time: the packages are fetched with this
# machine's apt, reading Debian ${SUITE}'s signed index into a private
# directory (nothing of the machine's apt configuration changes).
#
# Usage: hack/tools/smoke-guest.sh
# Environment: VIRTOP_TOOLS_DIR, DEBIAN_MIRROR (default http://deb.debian.org/debian),
# GUEST_REFRESH (set: ask the mirror for its current kernel even when a
# guest is cached).
set -euo pipefail

SUITE=trixie
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# The line the guest prints; launcher-smoke.sh looks for it.
GUEST_OK=virtop-guest-ok
# The guest image's name (a tag for the kernel version is added).
GUEST_IMAGE="${GUEST_IMAGE:-registry.virtop.dev/virtop-guest}"
# What the guest is made by: a guest of an older recipe is made again.
RECIPE=2

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

for c in apt-get dpkg-deb cpio gzip; do
	command -v "${c}" >/dev/null || die "${c} not found (apt-get install cpio dpkg)"
done
[[ -f "${keyring}" ]] || die "no ${keyring} (apt-get install debian-archive-keyring)"

mkdir -p "${cache}/kubevirt-node-debian"
# A guest of this recipe made before is used as it is, without asking the
# mirror for a newer kernel (GUEST_REFRESH=1 asks): tests use the cache
# offline.
if [[ -z "${GUEST_REFRESH:-}" ]]; then
	for d in $(ls -d "${cache}/kubevirt-node-debian/guest-"*"-r${RECIPE}" 2>/dev/null | sort -r); do
		if [[ -f "${d}/initrd.img" && -f "${d}/vmlinuz" && -f "${d}/guest-image.tar" ]]; then
			echo "cached: ${d}"
			echo "${d}"
			exit 0
		fi
	done
fi
work="$(mktemp -d "${cache}/kubevirt-node-debian/.guest.XXXXXX")"
tmp_files+=("${work}")
start=${SECONDS}

# A private apt: its own sources, lists and cache, no dpkg status.
mkdir -p "${work}/apt/lists/partial" "${work}/apt/cache/archives/partial" "${work}/apt/parts" "${work}/debs"
echo "deb [signed-by=${keyring}] ${mirror} ${SUITE} main" >"${work}/apt/sources.list"
cat >"${work}/apt/apt.conf" <<EOF
Dir::Etc::SourceList "${work}/apt/sources.list";
Dir::Etc::SourceParts "${work}/apt/parts";
Dir::Etc::Preferences "${work}/apt/preferences";
Dir::Etc::PreferencesParts "${work}/apt/parts";
Dir::State::Lists "${work}/apt/lists";
Dir::Cache "${work}/apt/cache";
Dir::State::status "/dev/null";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Sandbox::User "root";
EOF
export APT_CONFIG="${work}/apt/apt.conf"
apt-get update -qq >"${work}/apt.log" 2>&1 || die "apt-get update (Debian ${SUITE}) failed: $(tail -5 "${work}/apt.log")"
# The metapackage names the current kernel package.
kpkg="$(apt-cache depends linux-image-cloud-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')"
[[ -n "${kpkg}" ]] || die "linux-image-cloud-amd64 in Debian ${SUITE} names no kernel package"
kver="$(apt-cache show --no-all-versions "${kpkg}" | awk '/^Version: /{print $2; exit}')"
dir="${cache}/kubevirt-node-debian/guest-${kpkg#linux-image-}-${kver}-r${RECIPE}"
if [[ -f "${dir}/initrd.img" && -f "${dir}/vmlinuz" && -f "${dir}/guest-image.tar" ]]; then
	echo "cached: ${dir}"
	echo "${dir}"
	exit 0
fi
(cd "${work}/debs" && apt-get download -qq "${kpkg}" busybox-static >>"${work}/apt.log" 2>&1) ||
	die "downloading ${kpkg} busybox-static failed: $(tail -5 "${work}/apt.log")"
mkdir -p "${work}/kernel" "${work}/busybox"
dpkg-deb -x "${work}/debs/${kpkg}_"*.deb "${work}/kernel"
dpkg-deb -x "${work}/debs/busybox-static_"*.deb "${work}/busybox"

# The initramfs: busybox, its applets, the console device and /init.
ir="${work}/initramfs"
mkdir -p "${ir}/bin" "${ir}/dev" "${ir}/proc" "${ir}/sys"
# The binary, not another file of that name the package carries (trixie's
# has a 16-byte text file called busybox besides usr/bin/busybox).
bb=""
for p in usr/bin/busybox bin/busybox; do
	if [[ -f "${work}/busybox/${p}" && "$(head -c4 "${work}/busybox/${p}" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]]; then
		bb="${work}/busybox/${p}"
		break
	fi
done
[[ -n "${bb}" ]] || die "busybox-static holds no busybox ELF binary at usr/bin or bin: $(cd "${work}/busybox" && find . -name busybox)"
install -m 0755 "${bb}" "${ir}/bin/busybox"
for a in sh mount cat echo poweroff sleep grep cut setsid ls ps uname; do ln -s busybox "${ir}/bin/${a}"; done
mknod -m 0600 "${ir}/dev/console" c 5 1
mknod -m 0666 "${ir}/dev/null" c 1 3
cat >"${ir}/init" <<EOF
#!/bin/sh
# virtop's smoke guest (hack/tools/smoke-guest.sh)
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo "${GUEST_OK}: \$(cat /proc/sys/kernel/osrelease), uptime \$(cat /proc/uptime)"
if grep -qw virtop.stay /proc/cmdline; then
	# A VM's guest: alive lines, and a shell on the console for whoever
	# attaches (respawned when it exits).
	(while :; do sleep 10; echo "virtop-guest-alive \$(cut -d' ' -f1 /proc/uptime)"; done) &
	while :; do setsid sh -c 'exec sh </dev/console >/dev/console 2>&1'; done
fi
poweroff -f
# Not reached unless ACPI power-off failed: panic (the kernel's panic= reboots).
exit 1
EOF
chmod 0755 "${ir}/init"
(cd "${ir}" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 --reproducible | gzip -9n) >"${work}/initrd.img"
mkdir -p "${work}/out"
install -m 0644 "${work}/kernel/boot/vmlinuz-"* "${work}/out/vmlinuz"
install -m 0644 "${work}/initrd.img" "${work}/out/initrd.img"
for d in "${work}/debs/"*.deb; do dpkg-deb -f "${d}" Package Version | paste -sd' ' | sed 's/Package: //; s/ Version: / /'; done >"${work}/out/packages"
# The image for KubeVirt's kernel boot: the two files under boot/, nothing
# else (virt-controller runs the container-disk binary in it, from the
# launcher's image).
mkdir -p "${work}/image-root/boot"
cp "${work}/out/vmlinuz" "${work}/out/initrd.img" "${work}/image-root/boot/"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# A tag allows no '+': 6.12.117+deb13-cloud-amd64 is tagged 6.12.117-deb13-cloud-amd64.
tag="$(echo "${kpkg#linux-image-}" | tr '+~' '--')"
(cd "${repo}/hack/image" && "${GO:-go}" build -trimpath -o "${work}/image" .) || die "building hack/image failed"
"${work}/image" rootfs -root "${work}/image-root" -name "${GUEST_IMAGE}:${tag}" -user 107 -source-date-epoch 0 \
	-label "org.opencontainers.image.description=virtop's tiny guest for KubeVirt kernel boot: Debian's ${kpkg} ${kver} and busybox-static (hack/tools/smoke-guest.sh)" \
	-output "${work}/out/guest-image.tar" || die "packing the guest image failed"
echo "${GUEST_IMAGE}:${tag}" >"${work}/out/image-name"
rm -rf -- "${dir}"
mv "${work}/out" "${dir}"
echo "made the smoke guest in $((SECONDS - start))s: $(paste -sd, "${dir}/packages"), $(du -sh "${dir}" | cut -f1)"
echo "${dir}"
