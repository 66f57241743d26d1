// Package versionpath decides whether a KubeVirt installation may move
// from the version it runs to the version its resource asks for. It is a
// pure function of the two versions and the versions this virtop renders.
//
// Upstream's operator enforces no path: apply/reconcile.go
// (shouldTakeUpdatePath) only picks the order of an update (virt-handler
// first) or of a rollback (virt-api first). What upstream supports is what
// its release-blocking update test walks (tests/operator/operator.go,
// "should update kubevirt ... to target tested release", with
// tests/operator/version/version.go detectLatestYAndZReleases): from the
// latest release of the previous minor version (y-1) and from an earlier
// patch of the same minor (z-1), to the release under test. virtop follows
// that:
//
//   - a first install takes any version;
//   - within a minor version, any patch, up or down (same APIs);
//   - to the next minor version (N -> N+1), any patch of it;
//   - skipping a minor version is refused, naming the next version to go
//     to (the newest patch of the next minor this virtop has);
//   - a downgrade to an older minor version is refused: the newer release
//     may store objects at versions the older one does not serve (v1.9.0
//     stores VirtualMachineExports at v1, which v1.8.4's CRD lacks, so the
//     API server refuses v1.8.4's CRD), and upstream neither tests nor
//     documents it;
//   - versions that are not vMAJOR.MINOR.PATCH (a development tag such as
//     latest) cannot be ordered and are not judged; a pre-release
//     (v1.9.0-rc.1) counts as its release.
//
// The distance is measured from the version that runs (the resource's
// status.observedKubeVirtVersion): going back to it during an unfinished
// upgrade is always allowed.
package versionpath

import (
	"fmt"
	"strconv"
	"strings"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// Reasons a move is refused: the KubeVirt condition reasons of api/v1.
const (
	// ReasonSkipsMinor: the target is more than one minor version ahead.
	ReasonSkipsMinor = kvv1.ReasonUpgradeSkipsMinorVersion
	// ReasonDowngrade: the target is an older minor version.
	ReasonDowngrade = kvv1.ReasonDowngradeNotSupported
	// ReasonMajor: the target is another major version.
	ReasonMajor = kvv1.ReasonMajorVersionChange
)

// Decision is the outcome for one move.
type Decision struct {
	Allowed bool
	// Reason is one of the Reason constants when refused.
	Reason string
	// Next is the version to go to instead ("" when there is none to
	// name, or when allowed).
	Next string
	// Message explains a refusal to the user.
	Message string
}

type semver struct{ major, minor, patch int }

func parse(v string) (semver, bool) {
	s, ok := strings.CutPrefix(v, "v")
	if !ok {
		return semver{}, false
	}
	// A pre-release or build suffix (v1.9.0-rc.1) orders with its
	// release for this purpose.
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || strconv.Itoa(x) != p {
			return semver{}, false
		}
		n[i] = x
	}
	return semver{n[0], n[1], n[2]}, true
}

func (a semver) less(b semver) bool {
	if a.major != b.major {
		return a.major < b.major
	}
	if a.minor != b.minor {
		return a.minor < b.minor
	}
	return a.patch < b.patch
}

// Check decides the move from running to target; available are the
// versions this virtop can install (its catalog), used to name the next
// steps.
func Check(running, target string, available []string) Decision {
	if running == "" || running == target {
		return Decision{Allowed: true}
	}
	from, okFrom := parse(running)
	to, okTo := parse(target)
	if !okFrom || !okTo {
		return Decision{Allowed: true}
	}
	switch {
	case from.major != to.major:
		return Decision{Reason: ReasonMajor, Message: fmt.Sprintf(
			"spec.imageTag %s: KubeVirt %s runs, and a move to another major version is not supported; set spec.imageTag back to %s", target, running, running)}
	case to.minor < from.minor:
		return Decision{Reason: ReasonDowngrade, Next: running, Message: fmt.Sprintf(
			"spec.imageTag %s: KubeVirt %s runs, and downgrades to an older minor version are not supported (objects may be stored at API versions %s does not serve); %s keeps running: set spec.imageTag back to %s",
			target, running, target, running, running)}
	case to.minor <= from.minor+1:
		return Decision{Allowed: true}
	}
	path := Path(running, target, available)
	d := Decision{Reason: ReasonSkipsMinor}
	if len(path) > 0 && path[0] != target {
		d.Next = path[0]
		d.Message = fmt.Sprintf(
			"spec.imageTag %s: KubeVirt upgrades one minor version at a time, and %s runs; upgrade to %s next (the whole way: %s); %s keeps running meanwhile",
			target, running, d.Next, strings.Join(path, " -> "), running)
	} else {
		d.Message = fmt.Sprintf(
			"spec.imageTag %s: KubeVirt upgrades one minor version at a time, and %s runs; upgrade through a v%d.%d release first; %s keeps running meanwhile",
			target, running, from.major, from.minor+1, running)
	}
	return d
}

// Path lists the versions an upgrade from running to target goes through,
// one minor version at a time, target last: for each minor version in
// between, the newest patch of it in available. It is empty when a minor
// version in between has no release in available, or when target is not
// ahead of running.
func Path(running, target string, available []string) []string {
	from, okFrom := parse(running)
	to, okTo := parse(target)
	if !okFrom || !okTo || from.major != to.major || !from.less(to) {
		return nil
	}
	newest := map[int]semver{}
	names := map[semver]string{}
	for _, v := range available {
		s, ok := parse(v)
		if !ok || s.major != from.major {
			continue
		}
		names[s] = v
		if cur, seen := newest[s.minor]; !seen || cur.less(s) {
			newest[s.minor] = s
		}
	}
	var out []string
	for m := from.minor + 1; m < to.minor; m++ {
		s, ok := newest[m]
		if !ok {
			return nil
		}
		out = append(out, names[s])
	}
	return append(out, target)
}
