#!/usr/bin/env bash
# Regenerates the CRD schemas of every catalog release
# (internal/release/data/<release>/schemas/, only those that differ from the
# base release's).
#
# Method: controller-gen's CRD generator (the tool upstream KubeVirt runs)
# over the typed Go definitions of kubevirt.io/api at the release's
# kubevirtAPI version (release.yaml), one package at a time, inside that
# module's own directory, so the Kubernetes types it embeds resolve at the
# versions kubevirt.io/api itself pins. hack/releasegen then takes each CRD's
# storage-version schema, writes backticks as upstream's generator does (')
# and keeps the files that differ from the base's.
#
# The module comes from the Go module proxy. The proxy does not serve every
# version (v1.5.3, v1.6.6 and v1.7.4 are missing); for those, point
# KUBEVIRT_API_DIR_<version with _ for .> at the module's source, which is
# staging/src/kubevirt.io/api of kubevirt/kubevirt at the tag, e.g.
#   git -C <kubevirt git dir> archive v1.6.6 staging/src/kubevirt.io/api | tar -x -C /tmp/api-v1.6.6
#   KUBEVIRT_API_DIR_v1_6_6=/tmp/api-v1.6.6/staging/src/kubevirt.io/api make crd-schemas
# CRDs kubevirt.io/api does not define (virt-template's) take their schema
# from the release's reference dump (UPSTREAM_STRATEGIES, default ../shared/upstream-strategies).
#
# Usage: CONTROLLER_GEN=/path/to/controller-gen hack/crdschemas/gen.sh [release...]
# (`make crd-schemas` sets CONTROLLER_GEN and builds it when missing.)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
data="${root}/internal/release/data"
refs="${UPSTREAM_STRATEGIES:-${root}/../shared/upstream-strategies}"
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

[[ -n "${CONTROLLER_GEN:-}" && -x "${CONTROLLER_GEN}" ]] ||
	{ echo "gen.sh: CONTROLLER_GEN (${CONTROLLER_GEN:-unset}) is not an executable: run make controller-gen" >&2; exit 1; }
cg_version="$("${CONTROLLER_GEN}" --version | awk '{print $NF}')"

releases=("$@")
if [[ ${#releases[@]} -eq 0 ]]; then
	# Bases before the releases that derive from them.
	mapfile -t releases < <("${root}/hack/releases.sh")
fi

scratch="$(mktemp -d)"
trap 'rm -rf -- "${scratch}"' EXIT

for rel in "${releases[@]}"; do
	api="$(sed -n 's/^kubevirtAPI: *//p' "${data}/${rel}/release.yaml")"
	var="KUBEVIRT_API_DIR_${api//./_}"
	dir="${!var:-}"
	source="kubevirt.io/api ${api}"
	if [[ -z "${dir}" ]]; then
		dir="$(go mod download -json "kubevirt.io/api@${api}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || true
		[[ -d "${dir}" ]] || { echo "gen.sh: kubevirt.io/api@${api} is not served; set ${var} (see the header)" >&2; exit 1; }
	else
		source="${source} (kubevirt/kubevirt ${api} staging/src/kubevirt.io/api: the Go module proxy does not serve this version)"
	fi
	(cd "${dir}" && go mod download)
	out="${scratch}/${rel}"
	for p in $(cd "${dir}" && find . -mindepth 2 -maxdepth 2 -type d -name 'v*' | sed 's|^\./||' | sort); do
		# allowDangerousTypes: core/v1 has float64 fields (upstream passes it too).
		(cd "${dir}" && "${CONTROLLER_GEN}" crd:crdVersions=v1,allowDangerousTypes=true paths="./${p}" output:crd:dir="${out}/${p}")
	done
	dump="${refs}/${rel}/strategy.yaml.gz"
	[[ -f "${dump}" ]] || dump=""
	(cd "${root}" && KUBEVIRT_API_SOURCE="${source} with controller-gen ${cg_version}" \
		go run ./hack/releasegen schemas -release "${rel}" -in "${out}" ${dump:+-dump "${dump}"})
done
