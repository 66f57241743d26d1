#!/usr/bin/env bash
# Prints the releases of internal/release/data (one directory each), every
# base before the releases whose release.yaml names it (base:), by version
# otherwise. hack/make/crdschemas.mk and hack/crdschemas/gen.sh read it, so
# adding a release's directory adds it to both.
set -euo pipefail

data="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/internal/release/data"
cd "${data}"
mapfile -t all < <(ls -d v* | sort -V)
declare -A printed=()
while ((${#printed[@]} < ${#all[@]})); do
	progress=0
	for r in "${all[@]}"; do
		[[ -z "${printed[${r}]:-}" ]] || continue
		base="$(sed -n 's/^base: *//p' "${r}/release.yaml")"
		if [[ -z "${base}" || -n "${printed[${base}]:-}" ]]; then
			echo "${r}"
			printed[${r}]=1
			progress=1
		fi
	done
	((progress)) || { echo "releases.sh: a base is not in ${data}, or the base chain loops" >&2; exit 1; }
done
