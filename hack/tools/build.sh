#!/usr/bin/env bash
# Builds the pinned tool binaries from the Go module proxy into the cache
# ${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}/<tool>-<version>/<binary>
# (the layout internal/tools/toolpaths defines; prometheus-operator's binary is
# prometheus-operator-<version>/operator, its command's name). A binary
# already in the cache is skipped. Each build writes a temporary file and
# renames it into place, so an interrupted build never leaves a half-written
# binary behind.
#
# Binaries of one module are built by one `go build` (the four Kubernetes
# commands) or one `go install` (kwok and kwokctl): the packages they share
# are compiled once and in parallel, and their links run side by side.
#
# Usage: hack/tools/build.sh [GROUP|BINARY]...
#   groups:   demo:           what `virtop up` runs, in the order it starts
#                             them: etcd kube-apiserver kube-controller-manager
#                             kube-scheduler kubectl kwok kwokctl kubelet
#                             kube-proxy, then prometheus-operator and
#                             kube-state-metrics (`virtop up --prometheus`
#                             with a real node runs them: make demo's
#                             monitoring)
#             core (default): demo, then controller-gen (tests)
#             packaging:      helm kustomize
#             all:            core and packaging
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

demo=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl kubelet kube-proxy prometheus-operator kube-state-metrics)
core=("${demo[@]}" controller-gen)
packaging=(helm kustomize)

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

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
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy) echo "kubernetes ${KUBERNETES_VERSION}" ;;
	etcd) echo "etcd ${ETCD_VERSION}" ;;
	kwok | kwokctl) echo "kwok ${KWOK_VERSION}" ;;
	controller-gen) echo "controller-tools ${CONTROLLER_TOOLS_VERSION}" ;;
	prometheus-operator) echo "prometheus-operator ${PROMETHEUS_OPERATOR_VERSION}" ;;
	kube-state-metrics) echo "kube-state-metrics ${KUBE_STATE_METRICS_VERSION}" ;;
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
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy)
		build_in_module kube "k8s.io/kubernetes/cmd/${bin}" "${out}" "$(kube_ldflags)" ;;
	etcd)
		build_in_module etcd go.etcd.io/etcd/server/v3 "${out}" "-s -w" ;;
	kwok | kwokctl)
		install_at "sigs.k8s.io/kwok/cmd/${bin}@${KWOK_VERSION}" "${out}" \
			"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" ;;
	prometheus-operator)
		build_in_module prometheus-operator github.com/prometheus-operator/prometheus-operator/cmd/operator "${out}" \
			"-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v} -X github.com/prometheus/common/version.Branch=release -X github.com/prometheus/common/version.Revision=${PROMETHEUS_OPERATOR_VERSION}" ;;
	kube-state-metrics)
		install_at "k8s.io/kube-state-metrics/v2@${KUBE_STATE_METRICS_VERSION}" "${out}" \
			"-s -w -X github.com/prometheus/common/version.Version=${KUBE_STATE_METRICS_VERSION#v} -X github.com/prometheus/common/version.Branch=release -X github.com/prometheus/common/version.Revision=${KUBE_STATE_METRICS_VERSION}" ;;
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

# minutes_of BINARY -> "LOW HIGH": minutes a cold build takes on a 2-core
# machine, idle to busy (measured; the binaries after the first of a group
# cost only what they do not share with it).
minutes_of() {
	case "$1" in
	kube-apiserver) echo "4 9" ;;
	kube-controller-manager) echo "1 3" ;;
	kube-scheduler | kubectl) echo "0.5 1" ;;
	etcd | controller-gen | kustomize) echo "1 2" ;;
	kwok) echo "2 4" ;;
	kwokctl) echo "0.5 1" ;;
	kubelet) echo "2 4" ;;
	kube-proxy) echo "0.5 1" ;;
	prometheus-operator | helm) echo "3 6" ;;
	kube-state-metrics) echo "2 4" ;;
	*) echo "1 2" ;;
	esac
}

# plan TARGETS...: say what will be built and roughly how long it takes.
plan() {
	local t lo hi l h names=() low=0 high=0
	for t in "$@"; do
		cached "${t}" && continue
		names+=("${t}")
		read -r l h < <(minutes_of "${t}")
		low=$(awk -v a="${low}" -v b="${l}" 'BEGIN{print a+b}')
		high=$(awk -v a="${high}" -v b="${h}" 'BEGIN{print a+b}')
	done
	if [[ ${#names[@]} -eq 0 ]]; then
		echo "tools: all ${#} cached in ${cache}"
		return
	fi
	echo "tools: building ${#names[@]} of ${#}: ${names[*]}"
	echo "tools: a first build takes about ${low%.*}-${high%.*} minutes on a 2-core machine (more when it is busy); later runs reuse ${cache}"
}

# dest_of BINARY -> its path in the cache.
dest_of() {
	local tool version
	read -r tool version < <(tool_of "$1") || die "unknown tool: $1"
	echo "${cache}/${tool}-${version}/$(file_of "$1")"
}

cached() { [[ -x "$(dest_of "$1")" ]]; }

# build_kube_group BINARY...: the Kubernetes commands in one go build.
build_kube_group() {
	local out pkgs=() b start
	out="$(mktemp -d "${cache}/.kube-build.XXXXXX")"
	tmp_files+=("${out}")
	for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/${b}"); done
	echo "building $* ${KUBERNETES_VERSION} (one go build)..."
	start=${SECONDS}
	(cd "${here}/kube" && "${GO}" build -trimpath -ldflags "$(kube_ldflags)" -o "${out}/" "${pkgs[@]}") ||
		die "building $* ${KUBERNETES_VERSION} failed (see the go output above)"
	for b in "$@"; do
		mkdir -p "$(dirname "$(dest_of "${b}")")"
		chmod 0755 "${out}/${b}"
		mv -f "${out}/${b}" "$(dest_of "${b}")"
	done
	echo "built $* ${KUBERNETES_VERSION} in $((SECONDS - start))s: $(dirname "$(dest_of "$1")")"
}

# build_kwok_group BINARY...: kwok's commands in one go install.
build_kwok_group() {
	local gobin pkgs=() b start
	gobin="$(mktemp -d "${cache}/.gobin.XXXXXX")"
	tmp_files+=("${gobin}")
	for b in "$@"; do pkgs+=("sigs.k8s.io/kwok/cmd/${b}@${KWOK_VERSION}"); done
	echo "building $* ${KWOK_VERSION} (one go install)..."
	start=${SECONDS}
	GOBIN="${gobin}" "${GO}" install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" "${pkgs[@]}" ||
		die "building $* ${KWOK_VERSION} failed (see the go output above)"
	for b in "$@"; do
		mkdir -p "$(dirname "$(dest_of "${b}")")"
		mv -f "${gobin}/${b}" "$(dest_of "${b}")"
	done
	echo "built $* ${KWOK_VERSION} in $((SECONDS - start))s: $(dirname "$(dest_of "$1")")"
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
	echo "building ${bin} ${version}..."
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
		demo) targets+=("${demo[@]}") ;;
		core) targets+=("${core[@]}") ;;
		packaging) targets+=("${packaging[@]}") ;;
		all) targets+=("${core[@]}" "${packaging[@]}") ;;
		*) tool_of "${arg}" >/dev/null || die "unknown tool or group: ${arg} (groups: demo, core, packaging, all)"
			targets+=("${arg}") ;;
		esac
	done
	command -v "${GO}" >/dev/null || die "go not found in PATH"
	mkdir -p "${cache}"
	# Each binary once, in the order asked.
	local t seen=" " ordered=()
	for t in "${targets[@]}"; do
		[[ "${seen}" == *" ${t} "* ]] && continue
		seen+="${t} "
		ordered+=("${t}")
	done
	plan "${ordered[@]}"
	# The missing binaries of a group are built together, where the first
	# of them is asked for.
	local kube=() kwok=() done_groups=" "
	for t in "${ordered[@]}"; do
		cached "${t}" && continue
		case "${t}" in
		kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy) kube+=("${t}") ;;
		kwok | kwokctl) kwok+=("${t}") ;;
		esac
	done
	for t in "${ordered[@]}"; do
		if cached "${t}"; then
			echo "cached: $(dest_of "${t}")"
			continue
		fi
		case "${t}" in
		kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy)
			[[ "${done_groups}" == *" kube "* ]] || build_kube_group "${kube[@]}"
			done_groups+="kube " ;;
		kwok | kwokctl)
			[[ "${done_groups}" == *" kwok "* ]] || build_kwok_group "${kwok[@]}"
			done_groups+="kwok " ;;
		*) build_one "${t}" ;;
		esac
	done
}

main "$@"
