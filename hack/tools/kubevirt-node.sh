#!/usr/bin/env bash
# Builds upstream KubeVirt's node images, virt-handler and virt-launcher,
# from upstream's source at a release, on root file systems assembled from
# Debian's packages, for the local cluster's real node (a machine that
# reaches no container registry). A test peer: upstream's code is built and
# run here, never copied into virtop. Called by
# `hack/tools/kubevirt.sh RELEASE node`; not part of the default
# `make demo`/CI path (see docs/node-images.md for its cost).
#
# For each RELEASE it writes, beside the control plane's images,
#   <cache>/kubevirt-<release>/node-bin/   the commands below
#   <cache>/kubevirt-<release>/images/virt-handler.tar   ${KUBEVIRT_REGISTRY}/virt-handler:<release>
#   <cache>/kubevirt-<release>/images/virt-launcher.tar  ${KUBEVIRT_REGISTRY}/virt-launcher:<release>
# (the names virtop's strategy gives the DaemonSet and virt-controller's
# --launcher-image), and caches the Debian root file systems, shared by
# every release, under <cache>/kubevirt-node-debian/<key>/.
#
# The commands, as upstream's image rules (cmd/virt-handler/BUILD.bazel,
# cmd/virt-launcher/BUILD.bazel) list them:
#   virt-handler image:  virt-handler, virt-chroot (/usr/bin)
#   virt-launcher image: virt-launcher, virt-launcher-monitor, virt-freezer,
#                        virt-probe, virt-tail, container-disk,
#                        node-labeller.sh (/usr/bin), libvirt-hook-client
#                        (/usr/bin), the qemu hook, qemu.conf,
#                        virtqemud.conf, nsswitch.conf
# virt-chroot, virt-launcher-monitor, virt-freezer, virt-probe, virt-tail
# and libvirt-hook-client are pure Go (CGO_ENABLED=0). virt-handler needs
# cgo only for <linux/kvm.h> (its node labeller's KVM capabilities): built
# with this machine's gcc, static (netgo, osusergo). container-disk is C
# (cmd/container-disk-v2alpha/main.c), static like upstream's. virt-launcher
# needs cgo against libvirt and libnbd: it is linked, with this machine's
# gcc, against the launcher's own Debian libraries (a build root holding
# their -dev packages, used as --sysroot), and runs on the launcher root.
#
# The Debian roots (debootstrap --variant=minbase, Debian ${SUITE}, from
# ${DEBIAN_MIRROR}) hold, as upstream's rpm/ lists for its
# launcherbase/handlerbase:
#   launcher: libvirt-daemon-driver-qemu (virtqemud), libvirt-daemon-log
#             (virtlogd), libvirt-clients (virsh), qemu-system-x86,
#             qemu-utils, ovmf, passt, swtpm-tools, virtiofsd, nftables,
#             procps, xorriso, ncat, and libnbd0 (with libxml2-16) from
#             Debian unstable (upstream's v1.8/v1.9 vendor libnbd's Go
#             bindings 1.25, which call functions added in libnbd 1.24;
#             Debian 13 serves 1.22)
#   handler:  qemu-utils, iproute2, nftables, procps, xorriso, passt
#             (passt-repair)
#   build:    libc6-dev, libvirt-dev, pkgconf, libnbd-dev (unstable)
# What differs from upstream's images is in docs/node-images.md.
#
# Needs root (debootstrap, chown), debootstrap, gcc, libc6-dev and
# pkg-config on this machine (hack/tools/node-packages.sh --kubevirt-build
# installs them) and Debian's mirror at build time; nothing is downloaded
# when the images are used.
#
# Usage: hack/tools/kubevirt-node.sh RELEASE...
# Environment: VIRTOP_UPSTREAM_SRC, KUBEVIRT_REGISTRY, VIRTOP_TOOLS_DIR, GO,
# DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"

GO="${GO:-go}"
export GOTOOLCHAIN=local
unset GOOS GOARCH

cache="${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}"
upstream_src="${VIRTOP_UPSTREAM_SRC:-${repo}/../shared/upstream-src}"
[[ -d "${upstream_src}" ]] && upstream_src="$(cd "${upstream_src}" && pwd)"
registry="${KUBEVIRT_REGISTRY:-quay.io/kubevirt}"
registry="${registry%/}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
version_pkg="kubevirt.io/client-go/version"

SUITE=trixie
# The user and group upstream's launcher runs QEMU as (its passwd_entry
# qemu-user, gid 107), and the image's user.
QEMU_ID=107
launcher_pkgs=(libvirt-daemon-driver-qemu libvirt-daemon-log libvirt-clients qemu-system-x86 qemu-utils ovmf
	passt swtpm-tools virtiofsd nftables procps xorriso ncat)
handler_pkgs=(qemu-utils iproute2 nftables procps xorriso passt)
build_pkgs=(libc6-dev libvirt-dev pkgconf)
# What building virtqemud from Debian's libvirt source needs (see
# build_virtqemud): meson's required programs (perl, python3, xmllint,
# xsltproc), the libraries of the remote daemon and its RPC code, and
# dpkg-dev for Debian's compiler flags, gettext (msgfmt: src/access/meson.build
# runs it even with -Dnls=disabled), libnl (util/virnetdevbridge.c does
# not compile on Linux without it; Debian builds with it).
libvirt_build_pkgs=(dpkg-dev gcc meson ninja-build pkgconf perl python3 libxml2-utils xsltproc xz-utils patch gettext
	libglib2.0-dev libgnutls28-dev libxml2-dev libtirpc-dev libjson-c-dev libsasl2-dev libnl-3-dev libnl-route-3-dev)
# The meson options virtqemud is configured with: Debian's debian/rules
# options that reach the daemon's own code (the remote daemon's
# WITH_SASL, WITH_POLKIT; the QEMU driver and the daemons on; Debian's
# directories), every other feature off. The daemon loads Debian's own
# QEMU driver module (libvirt_driver_qemu.so, libvirt-daemon-driver-qemu)
# and links Debian's libvirt0, so no other option changes what runs.
virtqemud_meson=(--wrap-mode=nodownload --buildtype=plain --prefix=/usr --sysconfdir=/etc --localstatedir=/var
	--libdir=lib/x86_64-linux-gnu --libexecdir=/usr/lib/libvirt -Drunstatedir=/run -Dinitconfdir=/etc/default
	-Dauto_features=disabled -Dno_git=true -Ddriver_libvirtd=enabled -Ddriver_remote=enabled -Ddriver_qemu=enabled
	-Djson_c=enabled -Dlibnl=enabled -Dsasl=enabled -Dpolkit=enabled -Dremote_default_mode=legacy -Dqemu_user=libvirt-qemu
	-Dqemu_group=libvirt-qemu -Dinit_script=none -Ddocs=disabled -Dtests=disabled -Dnls=disabled -Drpath=disabled)
# From Debian unstable, on top of ${SUITE} (see above).
launcher_unstable=(libnbd0 libxml2-16)
build_unstable=(libnbd0 libnbd-dev libxml2-16)

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

archive_names() {
	local m
	[[ -f "$1" ]] && m="$(tar -xOf "$1" manifest.json 2>/dev/null)" && [[ "${m}" == *"\"$2\""* ]]
}

# root_key KIND: the cache key of a Debian root: its suite and a hash of
# its package lists and of this file's recipe for it.
root_key() {
	local kind="$1" list
	case "${kind}" in
	launcher) list="${launcher_pkgs[*]} unstable:${launcher_unstable[*]} qemu:${QEMU_ID}" ;;
	handler) list="${handler_pkgs[*]} qemu:${QEMU_ID}" ;;
	build) list="${build_pkgs[*]} unstable:${build_unstable[*]}" ;;
	libvirt) list="${libvirt_build_pkgs[*]}" ;;
	esac
	echo "${SUITE}-${kind}-$(echo "${list} recipe:5" | sha256sum | cut -c1-12)"
}

# in_root ROOT CMD...: runs CMD chrooted in ROOT, services never started.
in_root() {
	local root="$1"
	shift
	chroot "${root}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"
}

# debian_root KIND: sets root_dir to the cached root's directory, made
# when missing: debootstrap, the unstable packages (each alone from
# unstable, their dependencies from the suite where it has them), then the
# package caches and lists removed.
root_dir=""
debian_root() {
	local kind="$1" dir work pkgs=() unstable=() start
	dir="${cache}/kubevirt-node-debian/$(root_key "${kind}")"
	root_dir="${dir}"
	if [[ -f "${dir}.done" ]]; then
		return 0
	fi
	case "${kind}" in
	launcher) pkgs=("${launcher_pkgs[@]}") unstable=("${launcher_unstable[@]}") ;;
	handler) pkgs=("${handler_pkgs[@]}") ;;
	build) pkgs=("${build_pkgs[@]}") unstable=("${build_unstable[@]}") ;;
	libvirt) pkgs=("${libvirt_build_pkgs[@]}") ;;
	esac
	mkdir -p "${cache}/kubevirt-node-debian/debs"
	rm -rf -- "${dir}"
	work="$(mktemp -d "${cache}/kubevirt-node-debian/.${kind}.XXXXXX")"
	tmp_files+=("${work}")
	start=${SECONDS}
	echo "debootstrap ${SUITE} (${kind}: ${pkgs[*]})..."
	# The packages go in with apt, not debootstrap's --include: debootstrap
	# cannot order systemd's pre-dependencies. systemd-standalone-sysusers
	# satisfies what would otherwise pull systemd in.
	debootstrap --variant=minbase --cache-dir="${cache}/kubevirt-node-debian/debs" \
		"${SUITE}" "${work}/root" "${mirror}" >"${work}/debootstrap.log" 2>&1 ||
		die "debootstrap ${SUITE} ${kind} failed: $(tail -5 "${work}/debootstrap.log")"
	# No service starts inside the root.
	printf '#!/bin/sh\nexit 101\n' >"${work}/root/usr/sbin/policy-rc.d"
	chmod 0755 "${work}/root/usr/sbin/policy-rc.d"
	if [[ ${#unstable[@]} -gt 0 ]]; then
		# unstable's Release carries a Valid-Until a week ahead; a mirror
		# that serves a snapshot (this machine's) is older than that.
		echo "deb [check-valid-until=no] ${mirror} unstable main" >"${work}/root/etc/apt/sources.list.d/unstable.list"
		printf 'Package: *\nPin: release a=unstable\nPin-Priority: 100\n' >"${work}/root/etc/apt/preferences.d/unstable"
	fi
	in_root "${work}/root" apt-get update -qq >"${work}/apt.log" 2>&1 ||
		die "apt-get update in the ${kind} root failed: $(tail -5 "${work}/apt.log")"
	in_root "${work}/root" apt-get install -y -qq --no-install-recommends systemd-standalone-sysusers "${pkgs[@]}" \
		>>"${work}/apt.log" 2>&1 ||
		die "installing ${pkgs[*]} in the ${kind} root failed: $(tail -5 "${work}/apt.log")"
	if [[ ${#unstable[@]} -gt 0 ]]; then
		# Exactly these from unstable, by dpkg: apt would carry the
		# unstable release over to their dependencies (gnutls), which the
		# suite's other packages pin to its own versions.
		mkdir -p "${work}/root/tmp/unstable"
		in_root "${work}/root" sh -c 'cd /tmp/unstable && apt-get download -qq "$@"' sh "${unstable[@]/%//unstable}" \
			>>"${work}/apt.log" 2>&1 || die "downloading ${unstable[*]} from unstable failed: $(tail -5 "${work}/apt.log")"
		in_root "${work}/root" sh -c 'dpkg -i /tmp/unstable/*.deb' >>"${work}/apt.log" 2>&1 ||
			die "installing ${unstable[*]} from unstable in the ${kind} root failed: $(tail -5 "${work}/apt.log")"
		rm -rf "${work}/root/tmp/unstable"
	fi
	rm -f "${work}/root/etc/apt/sources.list.d/unstable.list" "${work}/root/etc/apt/preferences.d/unstable"
	in_root "${work}/root" apt-get clean
	rm -f "${work}/root/usr/sbin/policy-rc.d"
	rm -rf "${work}/root/var/lib/apt/lists/"* "${work}/root/var/cache/apt/"*.bin "${work}/root/var/log/"*.log \
		"${work}/root/var/log/apt/"* "${work}/root/var/cache/debconf/"*-old "${work}/root/var/lib/dpkg/"*-old
	# The versions, for the record (docs/node-images.md, the report).
	in_root "${work}/root" dpkg-query -W -f '${Package} ${Version}\n' >"${work}/packages.txt"
	mv -f "${work}/root" "${dir}"
	mv -f "${work}/packages.txt" "${dir}.packages"
	touch "${dir}.done"
	# Roots of this kind made by an older recipe are not used again.
	local old
	for old in "${cache}/kubevirt-node-debian/${SUITE}-${kind}-"*.done; do
		[[ -e "${old}" && "${old}" != "${dir}.done" ]] || continue
		rm -rf -- "${old%.done}" "${old%.done}.packages" "${old}"
	done
	echo "made the ${kind} root in $((SECONDS - start))s: ${dir} ($(du -sh "${dir}" | cut -f1))"
}

# build_virtqemud VERSION: sets virtqemud_dir to a directory holding
# usr/sbin/virtqemud built from Debian's libvirt source package at VERSION
# (the launcher root's libvirt0), made when missing. Debian configures
# libvirt with the QEMU driver and the daemons (debian/rules), so its
# build compiles virtqemud, and then leaves it out of every package
# (debian/not-installed); this builds that same daemon. The source is
# Debian's: libvirt_<upstream>.orig.tar.xz and
# libvirt_<VERSION>.debian.tar.xz from ${mirror}, checked against the
# sha256 sums of the suite's signed Sources index (apt-helper), Debian's
# patches (debian/patches/series) applied in order, Debian's compiler
# flags (dpkg-buildflags, hardening=+bindnow as debian/rules), meson with
# ${virtqemud_meson[*]}, and only the target src/virtqemud built. It
# links libvirt.so.0 by its versioned symbols (LIBVIRT_PRIVATE_<upstream>),
# which the launcher root's libvirt0 of the same version provides; with
# bindnow a mismatch stops it at start (the launcher's smoke check).
# Cached under <cache>/kubevirt-node-debian/virtqemud-<VERSION>-<key>.
virtqemud_dir=""
build_virtqemud() {
	local version="$1" key dir broot work start entry directory upstream name sum files=() n
	key="$(echo "${version} ${virtqemud_meson[*]} $(root_key libvirt) recipe:1" | sha256sum | cut -c1-12)"
	dir="${cache}/kubevirt-node-debian/virtqemud-${version}-${key}"
	virtqemud_dir="${dir}"
	[[ -f "${dir}.done" ]] && return 0
	debian_root libvirt
	broot="${root_dir}"
	start=${SECONDS}
	work="$(mktemp -d "${cache}/kubevirt-node-debian/.virtqemud.XXXXXX")"
	tmp_files+=("${work}")
	# The build happens in the cached root's /build, removed afterwards
	# with the source index, so the root stays as debian_root made it.
	tmp_files+=("${broot}/build" "${broot}/etc/apt/sources.list.d/virtop-src.list")
	rm -rf "${broot}/build"
	mkdir -p "${broot}/build"
	echo "deb-src ${mirror} ${SUITE} main" >"${broot}/etc/apt/sources.list.d/virtop-src.list"
	echo "building virtqemud from Debian's libvirt ${version} source..."
	in_root "${broot}" apt-get update -qq >"${work}/build.log" 2>&1 ||
		die "apt-get update (deb-src) in the libvirt build root failed: $(tail -5 "${work}/build.log")"
	# The source package's entry at exactly VERSION: its pool directory and
	# its files' sha256 sums.
	entry="$(in_root "${broot}" apt-cache showsrc libvirt | awk -v v="${version}" 'BEGIN {RS = ""; FS = "\n"}
		{ for (i = 1; i <= NF; i++) if ($i == "Version: " v) { print; exit } }')"
	directory="$(awk '/^Directory: /{print $2; exit}' <<<"${entry}")"
	[[ -n "${directory}" ]] || die "Debian ${SUITE}'s Sources index at ${mirror} has no libvirt ${version} (the launcher root's libvirt0); the mirror has moved on: remove <cache>/kubevirt-node-debian to make the roots again"
	# The .dsc is not needed (and some mirrors do not serve it): the
	# tarballs are checked against the same signed index.
	while read -r sum _ name; do
		[[ "${name}" == *.orig.tar.* || "${name}" == *.debian.tar.* ]] || continue
		[[ "${name}" == *.asc ]] && continue
		files+=("${name}")
		in_root "${broot}" /usr/lib/apt/apt-helper download-file "${mirror}/${directory}/${name}" "/build/${name}" "SHA256:${sum}" \
			>>"${work}/build.log" 2>&1 || die "downloading ${mirror}/${directory}/${name} failed: $(tail -5 "${work}/build.log")"
	done < <(awk '/^Checksums-Sha256:/{on=1; next} /^[^ ]/{on=0} on' <<<"${entry}")
	[[ ${#files[@]} -eq 2 ]] || die "libvirt ${version}: want an orig and a debian tarball in the Sources index, found: ${files[*]}"
	upstream="${version#*:}"
	upstream="${upstream%-*}"
	# Unpacked as dpkg-source does a 3.0 (quilt) package: the orig
	# tarball, debian/ over it, the series applied in order.
	in_root "${broot}" sh -ec '
		cd /build
		mkdir src
		tar -xf libvirt_*.orig.tar.* -C src --strip-components=1
		tar -xf libvirt_*.debian.tar.* -C src
		cd src
		if [ -f debian/patches/series ]; then
			sed -e "s/#.*//" -e "/^[[:space:]]*\$/d" debian/patches/series | while read -r p opt; do
				patch ${opt:--p1} --quiet --no-backup-if-mismatch -i "debian/patches/${p}"
			done
		fi' >>"${work}/build.log" 2>&1 || die "unpacking and patching libvirt ${version} failed: $(tail -5 "${work}/build.log")"
	n="$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${broot}/build/src/debian/patches/series" 2>/dev/null | wc -l)"
	echo "  libvirt ${version}: ${files[*]} (sha256 checked), ${n} Debian patches applied"
	in_root "${broot}" sh -ec '
		cd /build/src
		eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+bindnow dpkg-buildflags --export=sh)"
		meson setup /build/b "$@"
		ninja -C /build/b -j"$(nproc)" src/virtqemud
		strip --strip-unneeded -o /build/virtqemud /build/b/src/virtqemud' \
		sh "${virtqemud_meson[@]}" "-Dpackager=Debian (virtqemud rebuilt by virtop's kubevirt-node.sh)" \
		"-Dpackager_version=${version}" >>"${work}/build.log" 2>&1 ||
		die "building virtqemud from libvirt ${version} failed: $(tail -20 "${work}/build.log")"
	mkdir -p "${work}/out/usr/sbin"
	install -m 0755 "${broot}/build/virtqemud" "${work}/out/usr/sbin/virtqemud"
	cp "${work}/build.log" "${work}/out/build.log"
	rm -rf "${broot}/build" "${broot}/etc/apt/sources.list.d/virtop-src.list" "${broot}/var/lib/apt/lists/"*
	rm -rf -- "${dir}"
	mv -f "${work}/out" "${dir}"
	touch "${dir}.done"
	local old
	for old in "${cache}/kubevirt-node-debian/virtqemud-"*.done; do
		[[ -e "${old}" && "${old}" != "${dir}.done" ]] || continue
		rm -rf -- "${old%.done}" "${old}"
	done
	echo "built virtqemud ${version} in $((SECONDS - start))s: ${dir}/usr/sbin/virtqemud"
}

# add_qemu_user ROOT HOME: upstream's qemu user and group (107), which
# qemu.conf names and the launcher image runs as.
add_qemu_user() {
	local root="$1" home="$2"
	if grep -q "^qemu:" "${root}/etc/passwd"; then return 0; fi
	if awk -F: -v id="${QEMU_ID}" '$3 == id {found=1} END {exit !found}' "${root}/etc/passwd" "${root}/etc/group"; then
		die "uid or gid ${QEMU_ID} is taken in the Debian root $(basename "${root}"): $(awk -F: -v id="${QEMU_ID}" '$3 == id' "${root}/etc/passwd" "${root}/etc/group")"
	fi
	echo "qemu:x:${QEMU_ID}:${QEMU_ID}:qemu:${home}:/bin/bash" >>"${root}/etc/passwd"
	echo "qemu:x:${QEMU_ID}:" >>"${root}/etc/group"
	[[ -f "${root}/etc/shadow" ]] && echo "qemu:!:1::::::" >>"${root}/etc/shadow"
	if [[ -n "${home}" ]]; then
		mkdir -p "${root}${home}"
		chown "${QEMU_ID}:${QEMU_ID}" "${root}${home}"
	fi
}

# smoke ROOT WANT CMD...: runs CMD chrooted in ROOT (as its image would
# run it: the root's own libraries and files) and checks that it prints
# WANT (a fixed string); the build stops otherwise, with what it printed.
smoke() {
	local root="$1" want="$2" out rc=0
	shift 2
	out="$(in_root "${root}" "$@" 2>&1)" || rc=$?
	if [[ "${out}" != *"${want}"* ]]; then
		die "smoke check in $(basename "${root}"): \`$*\` (exit ${rc}) did not print \"${want}\": ${out:0:600}"
	fi
	echo "  ok: $* -> $(grep -m1 -F -- "${want}" <<<"${out}")"
}

build_node() {
	local rel="$1" dir tarball work src epoch date commit ldflags start bin broot lroot hroot stage t
	[[ "${rel}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "release ${rel}: want vMAJOR.MINOR.PATCH"
	dir="${cache}/kubevirt-${rel}"
	# The recipe the images were made by: images of an older one (say,
	# without virtqemud) are made again.
	local recipe
	recipe="$(root_key launcher) $(root_key handler) virtqemud:$(echo "${virtqemud_meson[*]} $(root_key libvirt)" | sha256sum | cut -c1-12) node:4"
	if archive_names "${dir}/images/virt-handler.tar" "${registry}/virt-handler:${rel}" &&
		archive_names "${dir}/images/virt-launcher.tar" "${registry}/virt-launcher:${rel}" &&
		[[ "$(cat "${dir}/images/node-recipe" 2>/dev/null)" == "${recipe}" ]]; then
		echo "cached: ${dir}/images/virt-handler.tar, virt-launcher.tar as ${registry}/<component>:${rel}"
		return 0
	fi
	tarball="${upstream_src}/kubevirt-${rel}.tar.gz"
	[[ -f "${tarball}" ]] || die "no ${tarball} (set VIRTOP_UPSTREAM_SRC to the directory that holds the releases)"
	[[ "$(id -u)" -eq 0 ]] || die "the node images are assembled as root (debootstrap, files owned by root and qemu); run as root"
	local c
	for c in debootstrap gcc pkg-config chroot setcap; do
		command -v "${c}" >/dev/null || PATH="${PATH}:/usr/sbin:/sbin" command -v "${c}" >/dev/null ||
			die "${c} not found: hack/tools/node-packages.sh --kubevirt-build installs what the node images' build needs"
	done
	PATH="${PATH}:/usr/sbin:/sbin"
	# The same check as the control plane's build.
	(cd "$(dirname "${tarball}")" && grep " \*\?kubevirt-${rel}.tar.gz\$" SHA256SUMS | sha256sum -c --quiet -) ||
		die "${tarball} does not match SHA256SUMS beside it"

	start=${SECONDS}
	debian_root build
	broot="${root_dir}"
	debian_root launcher
	lroot="${root_dir}"
	debian_root handler
	hroot="${root_dir}"
	echo "Debian roots ready in $((SECONDS - start))s"
	local libvirt_version qemu_driver_version
	libvirt_version="$(awk '$1 == "libvirt0" {print $2}' "${lroot}.packages")"
	qemu_driver_version="$(awk '$1 == "libvirt-daemon-driver-qemu" {print $2}' "${lroot}.packages")"
	[[ -n "${libvirt_version}" && "${libvirt_version}" == "${qemu_driver_version}" ]] ||
		die "the launcher root's libvirt0 (${libvirt_version}) and libvirt-daemon-driver-qemu (${qemu_driver_version}) differ"
	build_virtqemud "${libvirt_version}"

	mkdir -p "${dir}/node-bin" "${dir}/images"
	work="$(mktemp -d "${cache}/.kubevirt-node-${rel}.XXXXXX")"
	tmp_files+=("${work}")
	src="${work}/kubevirt-${rel}"
	tar -xzf "${tarball}" -C "${work}" || die "unpacking ${tarball} failed"
	epoch="$(stat -c %Y "${src}/BUILD.bazel")"
	date="$(date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ)"
	commit="$(gzip -dc "${tarball}" | git get-tar-commit-id 2>/dev/null || true)"
	ldflags="-s -w -X ${version_pkg}.gitVersion=${rel} -X ${version_pkg}.gitTreeState=clean -X ${version_pkg}.buildDate=${date}"
	[[ -n "${commit}" ]] && ldflags+=" -X ${version_pkg}.gitCommit=${commit}"
	bin="${work}/bin"
	mkdir -p "${bin}"

	start=${SECONDS}
	echo "building virt-chroot virt-launcher-monitor virt-freezer virt-probe virt-tail libvirt-hook-client ${rel} (CGO_ENABLED=0)..."
	(cd "${src}" && CGO_ENABLED=0 GOFLAGS="-mod=vendor -buildvcs=false" "${GO}" build -trimpath -ldflags "${ldflags}" -o "${bin}/" \
		./cmd/virt-chroot ./cmd/virt-launcher-monitor ./cmd/virt-freezer ./cmd/virt-probe ./cmd/virt-tail \
		./cmd/virt-launcher/libvirt-hook-client) || die "building the pure Go node commands of ${rel} failed (see above)"
	echo "building virt-handler ${rel} (cgo for <linux/kvm.h>, static)..."
	(cd "${src}" && CGO_ENABLED=1 GOFLAGS="-mod=vendor -buildvcs=false" "${GO}" build -trimpath -tags netgo,osusergo \
		-ldflags "${ldflags} -linkmode external -extldflags -static" -o "${bin}/" ./cmd/virt-handler) ||
		die "building virt-handler ${rel} failed (see above)"
	echo "building container-disk ${rel} (C, static)..."
	gcc -O2 -static -o "${bin}/container-disk" "${src}/cmd/container-disk-v2alpha/main.c" ||
		die "building container-disk ${rel} failed (see above)"
	echo "building virt-launcher ${rel} (cgo against the Debian root's libvirt and libnbd)..."
	(cd "${src}" && CGO_ENABLED=1 GOFLAGS="-mod=vendor -buildvcs=false" \
		CGO_CFLAGS="--sysroot=${broot} -O2" CGO_LDFLAGS="--sysroot=${broot}" \
		PKG_CONFIG_SYSROOT_DIR="${broot}" \
		PKG_CONFIG_LIBDIR="${broot}/usr/lib/x86_64-linux-gnu/pkgconfig:${broot}/usr/lib/pkgconfig:${broot}/usr/share/pkgconfig" \
		"${GO}" build -trimpath -ldflags "${ldflags}" -o "${bin}/" ./cmd/virt-launcher) ||
		die "building virt-launcher ${rel} failed (see above)"
	for c in virt-handler virt-chroot virt-launcher virt-launcher-monitor virt-freezer virt-probe virt-tail libvirt-hook-client container-disk; do
		chmod 0755 "${bin}/${c}"
		cp -f "${bin}/${c}" "${dir}/node-bin/.${c}.tmp" && mv -f "${dir}/node-bin/.${c}.tmp" "${dir}/node-bin/${c}"
	done
	echo "built the node commands of ${rel} in $((SECONDS - start))s: ${dir}/node-bin"

	start=${SECONDS}
	local image_tool="${work}/image"
	(cd "${repo}/hack/image" && "${GO}" build -trimpath -o "${image_tool}" .) || die "building hack/image failed"
	local labels=(-label org.opencontainers.image.source=https://github.com/kubevirt/kubevirt
		-label "org.opencontainers.image.revision=${commit}")

	# virt-launcher: the launcher root, a copy per release.
	stage="${work}/launcher"
	cp -a "${lroot}" "${stage}"
	add_qemu_user "${stage}" /home/qemu
	install -m 0755 -t "${stage}/usr/bin" "${bin}/virt-launcher" "${bin}/virt-launcher-monitor" "${bin}/virt-freezer" \
		"${bin}/virt-probe" "${bin}/virt-tail" "${bin}/container-disk" "${bin}/libvirt-hook-client" \
		"${src}/cmd/virt-launcher/node-labeller/node-labeller.sh"
	setcap cap_net_bind_service=+ep "${stage}/usr/bin/virt-launcher-monitor"
	install -m 0755 "${virtqemud_dir}/usr/sbin/virtqemud" "${stage}/usr/sbin/virtqemud"
	install -m 0644 -t "${stage}/etc/libvirt" "${src}/cmd/virt-launcher/qemu.conf" "${src}/cmd/virt-launcher/virtqemud.conf"
	install -m 0644 "${src}/cmd/virt-launcher/nsswitch.conf" "${stage}/etc/nsswitch.conf"
	# The libvirt client connects to virtqemud's own socket, as in upstream's
	# image (CentOS Stream's libvirt is built with remote_default_mode=direct;
	# Debian's with legacy, libvirtd's socket, which nothing serves here):
	# node-labeller.sh runs virsh with no URI.
	printf '%s\n' '# virtop: the client talks to virtqemud directly, as upstream'"'"'s image does' \
		'uri_default = "qemu:///system"' 'remote_mode = "direct"' >>"${stage}/etc/libvirt/libvirt.conf"
	install -d -m 0755 "${stage}/usr/lib64/qemu-kvm"
	# qemu's: virt-launcher (user qemu) replaces the hook with a link to
	# libvirt-hook-client at start (upstream's qemu-hook-tar, owner 107).
	install -d -m 0755 -o "${QEMU_ID}" -g "${QEMU_ID}" "${stage}/etc/libvirt/hooks"
	install -m 0755 -o "${QEMU_ID}" -g "${QEMU_ID}" "${src}/cmd/virt-launcher/qemu" "${stage}/etc/libvirt/hooks/qemu"
	# virt-handler reads the launcher's sockets through /proc/<pid>/root:
	# /var/run must be relative (upstream's var-run-symlink-tar).
	rm -rf "${stage}/var/run" && ln -s ../run "${stage}/var/run"
	printf '%s\n' "${commit}" >"${stage}/.version"
	echo "smoke checks in the launcher root:"
	smoke "${stage}" "QEMU emulator version" qemu-system-x86_64 -accel tcg -version
	smoke "${stage}" "qemu-img version" qemu-img --version
	smoke "${stage}" "virtlogd (libvirt)" /usr/sbin/virtlogd --version
	smoke "${stage}" "${libvirt_version%%-*}" virsh --version
	# Bound at start (bindnow): every libvirt.so.0 symbol it uses resolves.
	smoke "${stage}" "virtqemud (libvirt) ${libvirt_version%%-*}" /usr/sbin/virtqemud --version
	smoke "${stage}" "--qemu-timeout" /usr/bin/virt-launcher --help
	# container-disk has no help: it runs and refuses the option.
	smoke "${stage}" "unrecognized option" /usr/bin/container-disk --help
	# The image's user: qemu from v1.9.0 (upstream's d1b19fbd7a, "set default
	# user to 107 in container image"; that release's DaemonSet runs the
	# node labeller with runAsUser 0), root before (the labeller, run with
	# the image's user, changes /dev/kvm's mode).
	local launcher_user=0
	if [[ "$(printf '%s\n' v1.9.0 "${rel}" | sort -V | head -1)" == v1.9.0 ]]; then
		launcher_user="${QEMU_ID}"
	fi
	"${image_tool}" rootfs -root "${stage}" -name "${registry}/virt-launcher:${rel}" -entrypoint /usr/bin/virt-launcher \
		-user "${launcher_user}" -source-date-epoch "${epoch}" "${labels[@]}" \
		-label "org.opencontainers.image.description=KubeVirt virt-launcher ${rel} built from source on Debian ${SUITE}'s QEMU and libvirt by virtop's hack/tools/kubevirt-node.sh (a test peer, not the published image)" \
		-output "${dir}/images/virt-launcher.tar" || die "packing virt-launcher ${rel} failed"

	# virt-handler: the handler root.
	stage="${work}/handler"
	cp -a "${hroot}" "${stage}"
	add_qemu_user "${stage}" ""
	install -m 0755 -t "${stage}/usr/bin" "${bin}/virt-handler" "${bin}/virt-chroot"
	install -m 0644 "${src}/cmd/virt-launcher/nsswitch.conf" "${stage}/etc/nsswitch.conf"
	printf '%s\n' "${commit}" >"${stage}/.version"
	echo "smoke checks in the handler root:"
	smoke "${stage}" "--hostname-override" /usr/bin/virt-handler --help
	smoke "${stage}" "Usage" /usr/bin/virt-chroot --help
	smoke "${stage}" "qemu-img version" qemu-img --version
	"${image_tool}" rootfs -root "${stage}" -name "${registry}/virt-handler:${rel}" -entrypoint /usr/bin/virt-handler \
		-user 0 -source-date-epoch "${epoch}" "${labels[@]}" \
		-label "org.opencontainers.image.description=KubeVirt virt-handler ${rel} built from source on Debian ${SUITE} by virtop's hack/tools/kubevirt-node.sh (a test peer, not the published image)" \
		-output "${dir}/images/virt-handler.tar" || die "packing virt-handler ${rel} failed"
	for t in virt-handler virt-launcher; do
		echo "  ${dir}/images/${t}.tar: $(du -h "${dir}/images/${t}.tar" | cut -f1)"
	done
	echo "${recipe}" >"${dir}/images/node-recipe"
	echo "packed virt-handler and virt-launcher ${rel} in $((SECONDS - start))s"
}

main() {
	[[ $# -gt 0 ]] || die "usage: hack/tools/kubevirt-node.sh RELEASE..."
	command -v "${GO}" >/dev/null || die "go not found in PATH"
	mkdir -p "${cache}"
	local rel
	for rel in "$@"; do build_node "${rel}"; done
}

main "$@"
