# Sourced by hack/tools' build scripts (build.sh, kubevirt.sh,
# kubevirt-node.sh): what they put in tmp_files is removed when the script
# exits, also on INT and TERM; die says the script's name and exits 1.
tmp_files=()
cleanup() {
	local f
	for f in "${tmp_files[@]+"${tmp_files[@]}"}"; do rm -rf -- "$f"; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}
