package doctor

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// serviceAccount names a ServiceAccount.
type serviceAccount struct{ Namespace, Name string }

func (s serviceAccount) String() string { return s.Namespace + "/" + s.Name }

// permission is one thing Prometheus needs in the install namespace.
type permission struct{ Group, Resource string }

func (p permission) String() string {
	if p.Group == "" {
		return p.Resource
	}
	return p.Resource + "." + p.Group
}

// grant is where a permission comes from.
type grant struct {
	// Binding is "RoleBinding ns/name" or "ClusterRoleBinding name".
	Binding string
	Role    string
}

// rbacGrants finds, from the RBAC objects read, the bindings that let sa
// perform every verb in verbs on p in namespace ns. Evaluated by reading
// the rules (doctor writes nothing, not even a SubjectAccessReview).
func (f *Facts) rbacGrants(sa serviceAccount, ns string, p permission, verbs ...string) []grant {
	var out []grant
	roles := map[string]*rbacv1.Role{}
	for i := range f.Roles {
		if f.Roles[i].Namespace == ns {
			roles[f.Roles[i].Name] = &f.Roles[i]
		}
	}
	croles := map[string]*rbacv1.ClusterRole{}
	for i := range f.ClusterRoles {
		croles[f.ClusterRoles[i].Name] = &f.ClusterRoles[i]
	}
	rulesOf := func(ref rbacv1.RoleRef) []rbacv1.PolicyRule {
		switch ref.Kind {
		case "Role":
			if r := roles[ref.Name]; r != nil {
				return r.Rules
			}
		case "ClusterRole":
			if r := croles[ref.Name]; r != nil {
				return r.Rules
			}
		}
		return nil
	}
	for _, rb := range f.RoleBindings {
		if rb.Namespace != ns || !subjectsInclude(rb.Subjects, sa, rb.Namespace) {
			continue
		}
		if rulesAllow(rulesOf(rb.RoleRef), p, verbs) {
			out = append(out, grant{Binding: "RoleBinding " + rb.Namespace + "/" + rb.Name, Role: rb.RoleRef.Kind + " " + rb.RoleRef.Name})
		}
	}
	for _, crb := range f.ClusterRoleBindings {
		if crb.RoleRef.Kind != "ClusterRole" || !subjectsInclude(crb.Subjects, sa, "") {
			continue
		}
		if rulesAllow(rulesOf(crb.RoleRef), p, verbs) {
			out = append(out, grant{Binding: "ClusterRoleBinding " + crb.Name, Role: "ClusterRole " + crb.RoleRef.Name})
		}
	}
	return out
}

// subjectsInclude says whether a binding's subjects cover the
// ServiceAccount (by name, by user name, or through the service-account
// groups). bindingNS is the RoleBinding's namespace, the default namespace
// of ServiceAccount subjects that name none.
func subjectsInclude(subjects []rbacv1.Subject, sa serviceAccount, bindingNS string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNS
			}
			if s.Name == sa.Name && ns == sa.Namespace {
				return true
			}
		case rbacv1.UserKind:
			if s.Name == "system:serviceaccount:"+sa.Namespace+":"+sa.Name {
				return true
			}
		case rbacv1.GroupKind:
			switch s.Name {
			case "system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated":
				return true
			}
		}
	}
	return false
}

func rulesAllow(rules []rbacv1.PolicyRule, p permission, verbs []string) bool {
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
			if len(r.ResourceNames) > 0 {
				continue // list and watch cannot be limited by name
			}
			if covers(r.Verbs, v) && covers(r.APIGroups, p.Group) && covers(r.Resources, p.Resource) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// covers reports whether an RBAC rule's list (verbs, API groups or
// resources) names want or the wildcard.
func covers(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, "*")
}

func describeGrants(gs []grant) string {
	parts := make([]string, 0, len(gs))
	for _, g := range gs {
		parts = append(parts, g.Binding+" → "+g.Role)
	}
	return strings.Join(parts, ", ")
}

// nonResourceGrants finds the ClusterRoleBindings that let sa do verb on
// the non-resource URL path (only ClusterRoles grant those).
func (f *Facts) nonResourceGrants(sa serviceAccount, path, verb string) []grant {
	croles := map[string]*rbacv1.ClusterRole{}
	for i := range f.ClusterRoles {
		croles[f.ClusterRoles[i].Name] = &f.ClusterRoles[i]
	}
	var out []grant
	for _, crb := range f.ClusterRoleBindings {
		r := croles[crb.RoleRef.Name]
		if crb.RoleRef.Kind != "ClusterRole" || r == nil || !subjectsInclude(crb.Subjects, sa, "") {
			continue
		}
		for _, rule := range r.Rules {
			if covers(rule.Verbs, verb) && slices.ContainsFunc(rule.NonResourceURLs, func(u string) bool { return urlMatches(u, path) }) {
				out = append(out, grant{Binding: "ClusterRoleBinding " + crb.Name, Role: "ClusterRole " + crb.RoleRef.Name})
				break
			}
		}
	}
	return out
}

// urlMatches applies RBAC's non-resource URL rule: an exact path, "*", or a
// prefix ending in "*".
func urlMatches(rule, path string) bool {
	if rule == path || rule == "*" {
		return true
	}
	prefix, ok := strings.CutSuffix(rule, "*")
	return ok && strings.HasPrefix(path, prefix)
}

// operatorMetricsAuth says whether the Deployment virt-operator runs
// virtop's operator with its metrics served to authorized callers only
// (the default; not with --metrics-auth=false, nor when upstream's
// virt-operator runs, which serves them to anyone).
func (f *Facts) operatorMetricsAuth() bool {
	for _, d := range f.Deployments {
		if d.Name != vocab.VirtOperator {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			args := append(append([]string(nil), c.Command...), c.Args...)
			if !slices.Contains(args, "operator") {
				continue // upstream's virt-operator: no subcommand
			}
			for i, a := range args {
				switch {
				case a == "--metrics-auth=false", a == "--metrics-bind-address=0":
					return false
				case a == "--metrics-bind-address" && i+1 < len(args) && args[i+1] == "0":
					return false
				}
			}
			return true
		}
	}
	return false
}
