#!/usr/bin/env bash
# Builds upstream KubeVirt's control-plane commands from their source, and
# their images, as test peers for a node that reaches no container registry
# (on a machine that reaches quay.io, the published images are used instead).
# Upstream's code is built and run here, never copied into virtop.
#
# For each RELEASE (v1.9.0, …) it unpacks
#   ${VIRTOP_UPSTREAM_SRC:-<repo>/../shared/upstream-src}/kubevirt-<release>.tar.gz
# (after checking it against SHA256SUMS there; the tarball carries vendor/),
# builds in one `go build` (GOFLAGS=-mod=vendor CGO_ENABLED=0
# GOTOOLCHAIN=local, -trimpath, version-stamped like upstream's
# hack/version.sh so `virtctl version` reports the release) virt-api,
# virt-controller, virt-exportproxy, virt-operator, virtctl and, from v1.6
# on, virt-synchronization-controller (package cmd/synchronization-controller;
# the binary takes the name upstream's go_binary gives it and its Deployment
# runs), and packs each but virtctl as a docker-archive image with
# hack/image's `image peer`, into
#   ${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}/kubevirt-<release>/
#     bin/<command>              (static, for this machine's architecture)
#     images/<component>.tar     named ${KUBEVIRT_REGISTRY:-quay.io/kubevirt}/<component>:<release>
# (`ctr -n k8s.io images import images/virt-api.tar` gives exactly that name).
# What is cached is skipped (an image is cached when its archive carries the
# name asked for, so another KUBEVIRT_REGISTRY repacks it); everything is
# written to a temporary file or directory and renamed into place, so an
# interrupted run leaves nothing half-written.
#
# Upstream's release manifests are made here too, by upstream's own
# generator: tools/manifest-templator is built from the same archive into
#   <cache>/kubevirt-<release>/bin/manifest-templator
# and run as upstream's hack/build-manifests.sh runs it for a release (first
# --process-files, which includes manifests/generated/ — written by
# upstream's tools/resource-generator and checked in with the source —,
# then --process-vars with the release's values: namespace kubevirt,
# container prefix ${KUBEVIRT_REGISTRY}, tag <release>, IfNotPresent,
# verbosity 2), writing
#   <cache>/kubevirt-<release>/manifests/kubevirt-operator.yaml
#   <cache>/kubevirt-<release>/manifests/kubevirt-cr.yaml
# (what upstream attaches to a release). Nothing of them is written by hand.
# They are cached like the binaries; the templator's build does not repack
# the images.
#
# The unpacked source is removed when the script ends: -trimpath keeps the
# source's directory out of the Go build cache's keys, so a rebuild from a
# fresh unpack still hits the cache (about 20 s plus the unpack), and
# keeping ~300 MB of source per release would buy nothing. When only images
# are missing, only the BUILD.bazel files are unpacked (for the user).
#
# `pause` builds the pod sandbox image instead: hack/image/pause (a
# SIGTERM/SIGINT-waiting, zombie-reaping process, Kubernetes' pause
# rewritten in Go) packed as registry.k8s.io/pause:3.10, user 65535:65535,
# entrypoint /pause (as upstream's image), into
#   <cache>/node-images/pause.tar
# It takes a few seconds and is rebuilt on every run, so it follows the
# source.
#
# `node` (with one or more releases: `hack/tools/kubevirt.sh v1.9.0 node`)
# also builds each release's node images, virt-handler and virt-launcher,
# on root file systems assembled from Debian's packages
# (hack/tools/kubevirt-node.sh, which says how; root and Debian's mirror
# needed). It is not part of `make demo` or CI: docs/node-images.md gives
# its cost.
#
# Usage: hack/tools/kubevirt.sh RELEASE|pause|node...
# Environment: VIRTOP_UPSTREAM_SRC, KUBEVIRT_REGISTRY, VIRTOP_TOOLS_DIR, GO.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"

GO="${GO:-go}"
# Never fetch a toolchain: the machine's Go is the one we build with.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Everything is built for this machine: bin/ runs here (virtctl) and the
# images are for a node of the same architecture.
unset GOOS GOARCH

cache="${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}"
upstream_src="${VIRTOP_UPSTREAM_SRC:-${repo}/../shared/upstream-src}"
[[ -d "${upstream_src}" ]] && upstream_src="$(cd "${upstream_src}" && pwd)"
registry="${KUBEVIRT_REGISTRY:-quay.io/kubevirt}"
registry="${registry%/}"
pause_name="registry.k8s.io/pause:3.10"
version_pkg="kubevirt.io/client-go/version"

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# has_sync RELEASE: whether the release has the synchronization controller
# (v1.6 on).
has_sync() {
	local v="${1#v}" major minor
	major="${v%%.*}"
	minor="${v#*.}"; minor="${minor%%.*}"
	((major > 1 || (major == 1 && minor >= 6)))
}

# commands_of RELEASE: the commands built, as they are named in bin/.
commands_of() {
	local cmds=(virt-api virt-controller virt-exportproxy virt-operator virtctl)
	has_sync "$1" && cmds+=(virt-synchronization-controller)
	echo "${cmds[@]}"
}

# components_of RELEASE: the commands that get an image (all but virtctl).
components_of() {
	local c out=()
	for c in $(commands_of "$1"); do [[ "${c}" == virtctl ]] || out+=("${c}"); done
	echo "${out[@]}"
}

# package_of COMMAND: its package directory in upstream's tree.
package_of() {
	case "$1" in
	virt-synchronization-controller) echo cmd/synchronization-controller ;;
	*) echo "cmd/$1" ;;
	esac
}

# archive_names TAR NAME: whether the docker-archive TAR is named NAME.
archive_names() {
	local m
	[[ -f "$1" ]] && m="$(tar -xOf "$1" manifest.json 2>/dev/null)" && [[ "${m}" == *"\"$2\""* ]]
}

# image_tool: builds hack/image's command (once per run) into a temporary
# directory and sets image_tool_bin to its path.
image_tool_bin=""
image_tool() {
	[[ -z "${image_tool_bin}" ]] || return 0
	local d
	d="$(mktemp -d "${cache}/.image-tool.XXXXXX")"
	tmp_files+=("${d}")
	(cd "${repo}/hack/image" && "${GO}" build -trimpath -o "${d}/image" .) ||
		die "building hack/image failed (see the go output above)"
	image_tool_bin="${d}/image"
}

# verify_tarball FILE: its checksum against SHA256SUMS beside it.
verify_tarball() {
	local file="$1" base sums want got
	base="$(basename "${file}")"
	sums="$(dirname "${file}")/SHA256SUMS"
	[[ -f "${sums}" ]] || die "no ${sums} to check ${base} against"
	want="$(awk -v f="${base}" '$2 == f || $2 == "*" f {print $1}' "${sums}")"
	[[ -n "${want}" ]] || die "${sums} has no line for ${base}"
	got="$(sha256sum "${file}" | awk '{print $1}')"
	[[ "${got}" == "${want}" ]] || die "${file}: sha256 ${got}, SHA256SUMS says ${want}"
}

# user_of SRC COMMAND: the numeric user upstream's image runs as, read off
# the oci_image rule in its package's BUILD.bazel (user = "1001" from v1.5
# to v1.9, the nonroot-user passwd_entry of upstream's top-level
# BUILD.bazel). The pods run with runAsNonRoot and no runAsUser, so the
# kubelet takes the UID from the image config and it must be numeric.
user_of() {
	local build user
	build="$1/$(package_of "$2")/BUILD.bazel"
	[[ -f "${build}" ]] || die "no ${build}"
	user="$(sed -n 's/^[[:space:]]*user = "\([0-9][0-9]*\)",*$/\1/p' "${build}" | sort -u)"
	[[ "${user}" =~ ^[0-9]+$ ]] || die "${build}: want one numeric user = \"…\" in its oci_image, found '${user}'"
	echo "${user}"
}

build_release() {
	local rel="$1" dir tarball cmds comps c missing_bins=() missing_images=() work src commit epoch date ldflags out pkgs=() start user
	[[ "${rel}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "release ${rel}: want vMAJOR.MINOR.PATCH (or pause)"
	dir="${cache}/kubevirt-${rel}"
	tarball="${upstream_src}/kubevirt-${rel}.tar.gz"
	read -r -a cmds < <(commands_of "${rel}")
	read -r -a comps < <(components_of "${rel}")
	for c in "${cmds[@]}"; do [[ -x "${dir}/bin/${c}" ]] || missing_bins+=("${c}"); done
	for c in "${comps[@]}"; do archive_names "${dir}/images/${c}.tar" "${registry}/${c}:${rel}" || missing_images+=("${c}"); done
	if [[ ${#missing_bins[@]} -eq 0 && ${#missing_images[@]} -eq 0 ]]; then
		echo "cached: ${dir} (bin: ${cmds[*]}; images: ${comps[*]} as ${registry}/<component>:${rel})"
		return 0
	fi
	if [[ ! -f "${tarball}" ]]; then
		die "no ${tarball}: releases there: $(cd "${upstream_src}" 2>/dev/null && ls kubevirt-v*.tar.gz 2>/dev/null | sed 's/^kubevirt-//; s/\.tar\.gz$//' | tr '\n' ' ')(set VIRTOP_UPSTREAM_SRC to the directory that holds them)"
	fi
	verify_tarball "${tarball}"
	mkdir -p "${dir}/bin" "${dir}/images"
	work="$(mktemp -d "${cache}/.kubevirt-${rel}.XXXXXX")"
	tmp_files+=("${work}")
	src="${work}/kubevirt-${rel}"
	start=${SECONDS}
	if [[ ${#missing_bins[@]} -gt 0 ]]; then
		tar -xzf "${tarball}" -C "${work}" || die "unpacking ${tarball} failed"
	else
		tar -xzf "${tarball}" -C "${work}" --wildcards "kubevirt-${rel}/BUILD.bazel" "kubevirt-${rel}/cmd/*/BUILD.bazel" ||
			die "unpacking the BUILD.bazel files of ${tarball} failed"
	fi
	[[ -d "${src}" ]] || die "${tarball} does not hold kubevirt-${rel}/"
	if has_sync "${rel}" && [[ ! -d "${src}/cmd/synchronization-controller" ]]; then
		die "${tarball}: no cmd/synchronization-controller (expected from v1.6 on)"
	fi
	# git archive writes the commit's time on every file and its id in the
	# tar's global header: upstream's hack/version.sh stamps both.
	epoch="$(stat -c %Y "${src}/BUILD.bazel")"
	date="$(date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ)"
	commit=""
	command -v git >/dev/null && commit="$(gzip -dc "${tarball}" | git get-tar-commit-id 2>/dev/null || true)"
	echo "unpacked ${tarball} (commit ${commit:-unknown}, ${date}) in $((SECONDS - start))s"

	if [[ ${#missing_bins[@]} -gt 0 ]]; then
		ldflags="-s -w -X ${version_pkg}.gitVersion=${rel} -X ${version_pkg}.gitTreeState=clean -X ${version_pkg}.buildDate=${date}"
		[[ -n "${commit}" ]] && ldflags+=" -X ${version_pkg}.gitCommit=${commit}"
		for c in "${cmds[@]}"; do pkgs+=("./$(package_of "${c}")"); done
		out="$(mktemp -d "${cache}/.kubevirt-bin.XXXXXX")"
		tmp_files+=("${out}")
		echo "building ${cmds[*]} ${rel} (one go build; about 4 minutes from an empty build cache on 2 cores, 15-20 s with a warm one)..."
		start=${SECONDS}
		(cd "${src}" && GOFLAGS="-mod=vendor -buildvcs=false" "${GO}" build -trimpath -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}") ||
			die "building KubeVirt ${rel} failed (see the go output above)"
		[[ -f "${out}/synchronization-controller" ]] && mv -f "${out}/synchronization-controller" "${out}/virt-synchronization-controller"
		for c in "${cmds[@]}"; do
			chmod 0755 "${out}/${c}"
			mv -f "${out}/${c}" "${dir}/bin/${c}"
		done
		echo "built ${cmds[*]} ${rel} in $((SECONDS - start))s: ${dir}/bin"
		# Rebuilt binaries: every image is packed again.
		missing_images=("${comps[@]}")
	fi

	start=${SECONDS}
	image_tool
	for c in "${missing_images[@]}"; do
		user="$(user_of "${src}" "${c}")"
		"${image_tool_bin}" peer -binary "${dir}/bin/${c}" -name "${registry}/${c}:${rel}" -user "${user}" \
			-source-date-epoch "${epoch}" \
			-label org.opencontainers.image.source=https://github.com/kubevirt/kubevirt \
			-label "org.opencontainers.image.revision=${commit}" \
			-label "org.opencontainers.image.description=KubeVirt ${c} ${rel} built from source by virtop's hack/tools/kubevirt.sh (a test peer, not the published image)" \
			-output "${dir}/images/${c}.tar" || die "packing ${c} ${rel} failed"
	done
	echo "packed ${#missing_images[@]} images of ${rel} in $((SECONDS - start))s: ${dir}/images"
}

# build_manifests RELEASE DIR TARBALL: builds upstream's manifest templator
# (if missing) and writes the release manifests (if missing) into
# DIR/manifests.
build_manifests() {
	local rel="$1" dir="$2" tarball="$3" work src out f start
	local files=(kubevirt-operator kubevirt-cr)
	local missing=()
	# The operator's manifest names its image: another KUBEVIRT_REGISTRY
	# makes it again.
	grep -q "image: ${registry}/virt-operator:${rel}\$" "${dir}/manifests/kubevirt-operator.yaml" 2>/dev/null || missing+=(kubevirt-operator)
	[[ -s "${dir}/manifests/kubevirt-cr.yaml" ]] || missing+=(kubevirt-cr)
	if [[ -x "${dir}/bin/manifest-templator" && ${#missing[@]} -eq 0 ]]; then
		echo "cached: ${dir}/manifests (kubevirt-operator.yaml, kubevirt-cr.yaml made by upstream's manifest-templator)"
		return 0
	fi
	[[ -f "${tarball}" ]] || die "no ${tarball}: upstream's release manifests are made from its source"
	verify_tarball "${tarball}"
	work="$(mktemp -d "${cache}/.kubevirt-manifests-${rel}.XXXXXX")"
	tmp_files+=("${work}")
	src="${work}/kubevirt-${rel}"
	start=${SECONDS}
	if [[ ! -x "${dir}/bin/manifest-templator" ]]; then
		tar -xzf "${tarball}" -C "${work}" || die "unpacking ${tarball} failed"
		[[ -d "${src}/tools/manifest-templator" ]] || die "${tarball}: no tools/manifest-templator"
		out="$(mktemp -d "${cache}/.kubevirt-templator.XXXXXX")"
		tmp_files+=("${out}")
		echo "building upstream's manifest-templator ${rel}..."
		(cd "${src}" && GOFLAGS="-mod=vendor -buildvcs=false" "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/manifest-templator" ./tools/manifest-templator) ||
			die "building upstream's manifest-templator ${rel} failed (see the go output above)"
		mkdir -p "${dir}/bin"
		mv -f "${out}/manifest-templator" "${dir}/bin/manifest-templator"
		echo "built ${dir}/bin/manifest-templator in $((SECONDS - start))s"
		missing=("${files[@]}")
	else
		tar -xzf "${tarball}" -C "${work}" --wildcards "kubevirt-${rel}/manifests/*" "kubevirt-${rel}/assets/kubevirt_logo.png" ||
			die "unpacking manifests/ of ${tarball} failed"
	fi
	mkdir -p "${dir}/manifests"
	out="$(mktemp -d "${cache}/.kubevirt-manifests-out.XXXXXX")"
	tmp_files+=("${out}")
	for f in "${missing[@]}"; do
		# As hack/build-manifests.sh: includes first, then the variables
		# (run from the source's root: the logo's path is relative).
		(cd "${src}" &&
			"${dir}/bin/manifest-templator" --process-files --generated-manifests-dir="${src}/manifests/generated/" \
				--input-file="${src}/manifests/release/${f}.yaml.in" >"${out}/${f}.yaml.in.tmp" &&
			"${dir}/bin/manifest-templator" --process-vars --namespace=kubevirt --cdi-namespace=cdi \
				--container-prefix="${registry}" --container-tag="${rel}" --csv-version="${rel#v}" \
				--image-pull-policy=IfNotPresent --verbosity=2 --infra-replicas=0 --test-image-replicas=6 \
				--package-name=kubevirt-operatorhub --quay-repository=kubevirt --kubevirt-logo-path=assets/kubevirt_logo.png \
				--input-file="${out}/${f}.yaml.in.tmp" >"${out}/${f}.yaml") ||
			die "upstream's manifest-templator failed on manifests/release/${f}.yaml.in"
		# build-manifests.sh drops the empty last line go templating adds.
		sed -i -e '${/^$/d;}' "${out}/${f}.yaml"
		mv -f "${out}/${f}.yaml" "${dir}/manifests/${f}.yaml"
	done
	echo "wrote ${missing[*]/%/.yaml} of ${rel} with upstream's manifest-templator in $((SECONDS - start))s: ${dir}/manifests"
}

build_pause() {
	local dir="${cache}/node-images" work start
	mkdir -p "${dir}"
	work="$(mktemp -d "${cache}/.pause.XXXXXX")"
	tmp_files+=("${work}")
	start=${SECONDS}
	image_tool
	(cd "${repo}/hack/image" && "${GO}" build -trimpath -ldflags "-s -w" -o "${work}/pause" ./pause) ||
		die "building hack/image/pause failed (see the go output above)"
	"${image_tool_bin}" peer -binary "${work}/pause" -name "${pause_name}" -user 65535:65535 -username pause -path /pause \
		-label "org.opencontainers.image.description=the pod sandbox's pause, built by virtop's hack/tools/kubevirt.sh from hack/image/pause" \
		-output "${dir}/pause.tar" || die "packing ${pause_name} failed"
	echo "built ${pause_name} in $((SECONDS - start))s: ${dir}/pause.tar"
}

main() {
	[[ $# -gt 0 ]] || die "usage: hack/tools/kubevirt.sh RELEASE|pause|node... (releases: the kubevirt-<release>.tar.gz in ${upstream_src})"
	command -v "${GO}" >/dev/null || die "go not found in PATH"
	mkdir -p "${cache}"
	local arg node=false releases=()
	for arg in "$@"; do [[ "${arg}" == node ]] && node=true; done
	for arg in "$@"; do
		case "${arg}" in
		pause) build_pause ;;
		node) ;;
		*)
			build_release "${arg}"
			build_manifests "${arg}" "${cache}/kubevirt-${arg}" "${upstream_src}/kubevirt-${arg}.tar.gz"
			releases+=("${arg}")
			;;
		esac
	done
	if ${node}; then
		[[ ${#releases[@]} -gt 0 ]] || die "node: name the releases whose node images to build (hack/tools/kubevirt.sh v1.9.0 node)"
		VIRTOP_TOOLS_DIR="${cache}" KUBEVIRT_REGISTRY="${registry}" VIRTOP_UPSTREAM_SRC="${upstream_src}" GO="${GO}" \
			"${here}/kubevirt-node.sh" "${releases[@]}"
	fi
}

main "$@"
