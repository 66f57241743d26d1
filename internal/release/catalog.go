package release

import (
	"fmt"
	"sort"
	"sync"
)

// Default is the version installed when the KubeVirt resource names none.
const Default = "v1.9.0"

// Catalog is a set of releases virtop renders in process. Any other version
// is rendered by the dump-install-strategy Job of a virtop image whose
// catalog has it.
type Catalog struct {
	releases map[string]*Release
}

var builtin = sync.OnceValue(func() Catalog {
	c := Catalog{releases: map[string]*Release{}}
	for _, v := range Versions() {
		c.releases[v], _ = Lookup(v)
	}
	return c
})

// Builtin is every release this binary can render: all of the data.
func Builtin() Catalog { return builtin() }

// Lookup returns the release of a version, if the catalog has it.
func (c Catalog) Lookup(version string) (*Release, bool) {
	r, ok := c.releases[version]
	return r, ok
}

// Versions lists the catalog's versions, oldest first.
func (c Catalog) Versions() []string {
	out := make([]string, 0, len(c.releases))
	for v := range c.releases {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return out
}

// Restrict returns a catalog holding only the given versions, for an
// operator that plays an older release (the operator setting
// --catalog-versions) and for tests of the strategy Job path.
func (c Catalog) Restrict(versions []string) (Catalog, error) {
	keep := map[string]*Release{}
	for _, v := range versions {
		r, ok := c.releases[v]
		if !ok {
			return Catalog{}, &NotInCatalogError{Version: v, Have: c.Versions()}
		}
		keep[v] = r
	}
	return Catalog{releases: keep}, nil
}

// NotInCatalogError says a version cannot be rendered in process.
type NotInCatalogError struct {
	Version string
	Have    []string
}

func (e *NotInCatalogError) Error() string {
	return fmt.Sprintf("KubeVirt %s is not in this virtop's catalog (it has %v)", e.Version, e.Have)
}
