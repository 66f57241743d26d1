#!/usr/bin/env bash
# Fails when a package under internal/ is imported by no other package of
# the module: its code, its tests, cmd/, hack/ and test/ all count, with
# every build tag the tree uses. A package that holds only tests (at most a
# doc.go besides its _test.go files) imports itself into nothing and is
# exempt. `make verify` runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
module=$(go list -m)
list() {
	go list -tags "$1" -f '{{.ImportPath}}|{{join .GoFiles ","}}|{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...
}
# The faults tag swaps files of internal/faultpoint; list both sides.
rows=$( { list long,bench,packaging; list long,bench,packaging,faults; } | sort -u)
orphans=$(awk -F'|' -v internal="$module/internal/" '
	{
		n = split($3, imps, " ")
		for (i = 1; i <= n; i++) if (imps[i] != $1) imported[imps[i]] = 1
		if (index($1, internal) == 1 && $2 != "" && $2 != "doc.go") pkgs[$1] = 1
	}
	END { for (p in pkgs) if (!(p in imported)) print p }' <<<"$rows" | sort)
if [ -n "$orphans" ]; then
	echo "packages imported by nothing (delete them, or import them where they belong):" >&2
	echo "$orphans" | sed 's/^/  /' >&2
	exit 1
fi
