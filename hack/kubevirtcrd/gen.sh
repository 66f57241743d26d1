#!/usr/bin/env bash
# Regenerates config/crd/upstream/kubevirt.io_kubevirts.yaml: upstream's
# KubeVirt CRD, its schema from kubevirt.io/api of the newest catalog release
# (internal/release/data/<release>/release.yaml, kubevirtAPI), with
# controller-gen run over core/v1 inside that module as hack/crdschemas/gen.sh
# does for the other CRDs. Run by hand (`make kubevirt-crd-upstream`): it
# needs the Go module proxy. `make manifests` then lays virtop's checks over
# it into config/crd/bases.
#
# Usage: CONTROLLER_GEN=/path/to/controller-gen hack/kubevirtcrd/gen.sh [release]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
data="${root}/internal/release/data"
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

[[ -n "${CONTROLLER_GEN:-}" && -x "${CONTROLLER_GEN}" ]] ||
	{ echo "gen.sh: CONTROLLER_GEN (${CONTROLLER_GEN:-unset}) is not an executable: run make controller-gen" >&2; exit 1; }
cg_version="$("${CONTROLLER_GEN}" --version | awk '{print $NF}')"

rel="${1:-$(cd "${data}" && ls -d v* | sort -V | tail -1)}"
api="$(sed -n 's/^kubevirtAPI: *//p' "${data}/${rel}/release.yaml")"
[[ -n "${api}" ]] || { echo "gen.sh: ${data}/${rel}/release.yaml names no kubevirtAPI" >&2; exit 1; }
dir="$(go mod download -json "kubevirt.io/api@${api}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || true
[[ -d "${dir}" ]] || { echo "gen.sh: kubevirt.io/api@${api} is not served by the Go module proxy" >&2; exit 1; }
(cd "${dir}" && go mod download)

scratch="$(mktemp -d)"
trap 'rm -rf -- "${scratch}"' EXIT
# allowDangerousTypes: core/v1 has float64 fields (upstream passes it too).
(cd "${dir}" && "${CONTROLLER_GEN}" crd:crdVersions=v1,allowDangerousTypes=true paths=./core/v1 output:crd:dir="${scratch}")
(cd "${root}" && go run ./hack/kubevirtcrd upstream -in "${scratch}" \
	-source "core/v1 of kubevirt.io/api ${api} (KubeVirt ${rel}, the newest catalog release) with controller-gen ${cg_version}" \
	-out config/crd/upstream/kubevirt.io_kubevirts.yaml)
echo "wrote config/crd/upstream/kubevirt.io_kubevirts.yaml from kubevirt.io/api ${api}"
