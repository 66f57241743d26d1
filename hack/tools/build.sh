#!/usr/bin/env bash
# Builds the pinned tool binaries from the Go module proxy into the cache
# ${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}/<tool>-<version>/<binary>
# (the layout internal/tools/toolpaths defines; prometheus-operator's binary is
# prometheus-operator-<version>/operator, its command's name). A binary
# already in the cache is skipped. Each build writes a temporary file and
# renames it into place, so an interrupted build never leaves a half-written
# binary behind.
#
# Usage: hack/tools/build.sh [GROUP|BINARY]...
#   groups:   core (default): kube-apiserver etcd kubectl kube-controller-manager
#                             kube-scheduler kwok kwokctl controller-gen
#                             prometheus-operator
#             packaging:      helm kustomize
#             all:            both
#   binaries: any of the names above
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${here}/versions.env"

GO="${GO:-go}"
export CGO_ENABLED=0
# Never fetch a toolchain: the machine's Go is the one we build with.
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

cache="${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}"

core=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok kwokctl controller-gen prometheus-operator)
packaging=(helm kustomize)

tmp_files=()
cleanup() {
	local f
	for f in "${tmp_files[@]+"${tmp_files[@]}"}"; do rm -rf -- "$f"; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() {
	echo "build.sh: $*" >&2
	exit 1
}

# Version-stamping flags for the Kubernetes commands (what --version prints).
kube_ldflags() {
	local v="${KUBERNETES_VERSION}" major minor p flags=""
	major="${v#v}"; major="${major%%.*}"
	minor="${v#v*.}"; minor="${minor%%.*}"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X ${p}.gitVersion=${v} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor} -X ${p}.gitTreeState=clean"
	done
	echo "-s -w${flags}"
}

# tool_of BINARY -> "<cache tool name> <version>"
tool_of() {
	case "$1" in
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl) echo "kubernetes ${KUBERNETES_VERSION}" ;;
	etcd) echo "etcd ${ETCD_VERSION}" ;;
	kwok | kwokctl) echo "kwok ${KWOK_VERSION}" ;;
	controller-gen) echo "controller-tools ${CONTROLLER_TOOLS_VERSION}" ;;
	prometheus-operator) echo "prometheus-operator ${PROMETHEUS_OPERATOR_VERSION}" ;;
	helm) echo "helm ${HELM_VERSION}" ;;
	kustomize) echo "kustomize ${KUSTOMIZE_VERSION}" ;;
	*) return 1 ;;
	esac
}

# file_of BINARY -> the binary's file name in the cache (its command's name).
file_of() {
	case "$1" in
	prometheus-operator) echo operator ;; # cmd/operator
	*) echo "$1" ;;
	esac
}

# build_in_module DIR PACKAGE OUT LDFLAGS: go build inside one of the tools
# modules under hack/tools (they carry replace directives, so no go install).
build_in_module() {
	local dir="$1" pkg="$2" out="$3" ldflags="$4"
	(cd "${here}/${dir}" && "${GO}" build -trimpath -ldflags "${ldflags}" -o "${out}" "${pkg}")
}

# install_at PKG@VERSION OUT LDFLAGS: go install into a private GOBIN, then
# move the binary to OUT (for modules without replace directives).
install_at() {
	local pkgver="$1" out="$2" ldflags="$3" gobin name
	gobin="$(mktemp -d "${cache}/.gobin.XXXXXX")"
	tmp_files+=("${gobin}")
	name="${pkgver%@*}"
	[[ "${name}" =~ /v[0-9]+$ ]] && name="${name%/v*}" # major-version suffix: the binary is named after the element before
	name="${name##*/}"
	GOBIN="${gobin}" "${GO}" install -trimpath -ldflags "${ldflags}" "${pkgver}" || return 1
	mv -f "${gobin}/${name}" "${out}"
}

run_build() {
	local bin="$1" out="$2"
	case "${bin}" in
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
		build_in_module kube "k8s.io/kubernetes/cmd/${bin}" "${out}" "$(kube_ldflags)" ;;
	etcd)
		build_in_module etcd go.etcd.io/etcd/server/v3 "${out}" "-s -w" ;;
	kwok | kwokctl)
		install_at "sigs.k8s.io/kwok/cmd/${bin}@${KWOK_VERSION}" "${out}" \
			"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" ;;
	prometheus-operator)
		build_in_module prometheus-operator github.com/prometheus-operator/prometheus-operator/cmd/operator "${out}" \
			"-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v} -X github.com/prometheus/common/version.Branch=release -X github.com/prometheus/common/version.Revision=${PROMETHEUS_OPERATOR_VERSION}" ;;
	controller-gen)
		install_at "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" "${out}" "-s -w" ;;
	helm)
		install_at "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" "${out}" \
			"-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean" ;;
	kustomize)
		install_at "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}" "${out}" \
			"-s -w -X sigs.k8s.io/kustomize/api/provenance.version=${KUSTOMIZE_VERSION}" ;;
	esac
}

slow_note() {
	case "$1" in
	kube-apiserver) echo " (takes several minutes on 2 cores)" ;;
	kube-controller-manager | kwok | helm | prometheus-operator) echo " (several minutes on a busy machine)" ;;
	etcd | kubectl | kwokctl | kustomize | controller-gen) echo " (a minute or more)" ;;
	esac
}

build_one() {
	local bin="$1" tool version dir dest tmp start secs
	read -r tool version < <(tool_of "${bin}") || die "unknown tool: ${bin}"
	dir="${cache}/${tool}-${version}"
	dest="${dir}/$(file_of "${bin}")"
	if [[ -x "${dest}" ]]; then
		echo "cached: ${dest}"
		return 0
	fi
	mkdir -p "${dir}"
	tmp="$(mktemp "${dir}/.${bin}.tmp.XXXXXX")"
	tmp_files+=("${tmp}")
	echo "building ${bin} ${version}$(slow_note "${bin}")..."
	start=${SECONDS}
	if ! run_build "${bin}" "${tmp}"; then
		die "building ${bin} ${version} failed (see the go output above)"
	fi
	chmod 0755 "${tmp}"
	mv -f "${tmp}" "${dest}"
	secs=$((SECONDS - start))
	echo "built ${bin} ${version} in ${secs}s: ${dest}"
}

main() {
	local targets=() arg
	[[ $# -gt 0 ]] || set -- core
	for arg in "$@"; do
		case "${arg}" in
		core) targets+=("${core[@]}") ;;
		packaging) targets+=("${packaging[@]}") ;;
		all) targets+=("${core[@]}" "${packaging[@]}") ;;
		*) tool_of "${arg}" >/dev/null || die "unknown tool or group: ${arg} (groups: core, packaging, all)"
			targets+=("${arg}") ;;
		esac
	done
	command -v "${GO}" >/dev/null || die "go not found in PATH"
	mkdir -p "${cache}"
	local t
	for t in "${targets[@]}"; do build_one "${t}"; done
}

main "$@"
