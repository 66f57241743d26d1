#!/usr/bin/env bash
# Regenerates internal/components/schemas/*.yaml: the OpenAPI v3 schemas of
# the 16 KubeVirt CRDs virtop renders (internal/components/crds.go).
#
# Method: controller-gen's CRD generator (the same tool upstream KubeVirt's
# hack/generate.sh runs) over the typed Go definitions of the published
# kubevirt.io/api module, one package at a time, inside that module's own
# directory in the module cache, so the Kubernetes types it embeds (PodSpec
# pieces, PVC specs, quantities, ...) resolve at the versions kubevirt.io/api
# itself pins (k8s.io/api v0.31.0, what KubeVirt v1.5 vendors). The extractor
# (go run . in this directory) then takes each CRD's schema and writes it as
# <plural>.<group>.yaml.
#
# Only the package of each CRD's storage version is generated: every served
# version of a CRD gets that schema (see crdSchema in crds.go for why).
#
# Usage: CONTROLLER_GEN=/path/to/controller-gen hack/crdschemas/gen.sh
# (`make crd-schemas` sets CONTROLLER_GEN and builds it when missing.)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
out="${root}/internal/components/schemas"
# The proxy does not serve kubevirt.io/api@v1.5.3; v1.5.0 is the newest
# v1.5 release it has. Both catalog releases (v1.5.0, v1.5.3) use it.
api_mod=kubevirt.io/api
api_version="${KUBEVIRT_API_VERSION:-v1.5.0}"
# The packages of the storage versions of the 16 CRDs.
packages=(core/v1 snapshot/v1beta1 instancetype/v1beta1 pool/v1alpha1 migrations/v1alpha1 export/v1beta1 clone/v1beta1)
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

[[ -n "${CONTROLLER_GEN:-}" && -x "${CONTROLLER_GEN}" ]] ||
	{ echo "gen.sh: CONTROLLER_GEN (${CONTROLLER_GEN:-unset}) is not an executable: run make controller-gen" >&2; exit 1; }
cg_version="$("${CONTROLLER_GEN}" --version | awk '{print $NF}')"

dir="$(go mod download -json "${api_mod}@${api_version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "${dir}" ]] || { echo "gen.sh: ${api_mod}@${api_version} not in the module cache" >&2; exit 1; }
# The module's own dependencies (its go.sum pins them).
(cd "${dir}" && go mod download)

scratch="$(mktemp -d)"
trap 'rm -rf -- "${scratch}"' EXIT

start=${SECONDS}
for p in "${packages[@]}"; do
	# allowDangerousTypes: core/v1 has float64 fields (upstream passes it too).
	(cd "${dir}" && "${CONTROLLER_GEN}" crd:crdVersions=v1,allowDangerousTypes=true paths="./${p}" output:crd:dir="${scratch}/${p}")
done

(cd "${here}" && go run . -in "${scratch}" -out "${out}" \
	-source "${api_mod}@${api_version}" -generator "controller-gen ${cg_version}")
echo "gen.sh: wrote $(ls "${out}"/*.yaml | wc -l) schemas in $((SECONDS - start))s"
