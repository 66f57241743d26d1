package ownership

import "k8s.io/apimachinery/pkg/runtime/schema"

// InstallNamespaceOnly are the namespaced managed kinds virtop applies in
// the install namespace and nowhere else (Namespaced, not Elsewhere): the
// operator caches them there only, its Role grants some of them (Secrets,
// Routes) there only, and prune and uninstall list them there.
func (k *Kinds) InstallNamespaceOnly() map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for _, gvk := range k.Namespaced {
		out[gvk] = true
	}
	for _, e := range k.Elsewhere {
		delete(out, e.GVK)
	}
	return out
}
