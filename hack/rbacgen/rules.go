package main

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// ownRule is a permission the operator needs for its own work (not to grant
// the components their roles), with the reason printed above it.
type ownRule struct {
	why  string
	rule rbacv1.PolicyRule
}

func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// manageVerbs: the cache lists and watches every managed kind cluster-wide
// (label-scoped, which RBAC cannot express), server-side apply is a patch
// (creating through apply needs create as well), prune and uninstall delete.
var manageVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// ownClusterRules are what the operator itself does cluster-wide. Keep in
// step with internal/operator (caches, watches) and internal/controller
// (status, uninstall) and internal/ownership (the kinds managed, watched and
// removed; rules_test.go checks every one of them is covered).
var ownClusterRules = []ownRule{
	{"The KubeVirt resource: cached and watched, finalizer added and removed (patch), one per cluster checked by the webhook (list).",
		rule("kubevirt.io", []string{"kubevirts"}, "get", "list", "watch", "patch")},
	{"The KubeVirt resource's status (field manager virtop-status). The operator never writes the spec.",
		rule("kubevirt.io", []string{"kubevirts/status"}, "patch")},
	{"virtop's monitoring tuning resource (KubeVirtMonitoring): read and watched.",
		rule("virtop.dev", []string{"kubevirtmonitorings"}, "get", "list", "watch")},
	{"The KubeVirtMonitoring resource's status (its Accepted and Applied conditions).",
		rule("virtop.dev", []string{"kubevirtmonitorings/status"}, "patch")},
	{"RoleBindings of the install strategy, applied in the install namespace and, from v1.9.0, one in kube-system (to the Role extension-apiserver-authentication-reader), cached there too, for which the manifests ship no Role. Roles are the Role's (install namespace only); ClusterRoles and ClusterRoleBindings are named (below). Creating roles also needs every permission they grant: see the generated rules below (no escalate or bind verb).",
		rule("rbac.authorization.k8s.io", []string{"rolebindings"}, manageVerbs...)},
	{"Storage migration: every object of a KubeVirt CRD whose new version drops a stored version is listed and written back unchanged (the instancetypes and preferences in v1.7, the exports in v1.9).",
		rule("instancetype.kubevirt.io", []string{"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences", "virtualmachineinstancetypes", "virtualmachinepreferences"}, "get", "list", "update")},
	{"Storage migration of the VirtualMachineExports (v1.9.0's CRD drops v1alpha1).",
		rule("export.kubevirt.io", []string{"virtualmachineexports"}, "get", "list", "update")},
	{"The common instancetypes and preferences (cluster-scoped), applied, cached, pruned and uninstalled. Not named: KubeVirt's ClusterRoles kubevirt.io:admin and kubevirt.io:edit grant create, patch and delete on every one (the operator must hold what it grants), and storage migration rewrites every object of these kinds, users' included.",
		rule("instancetype.kubevirt.io", []string{"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"}, manageVerbs...)},
	{"Monitoring resolution: which Prometheus selects KubeVirt's ServiceMonitor, and its namespace and ServiceAccount.",
		rule("monitoring.coreos.com", []string{"prometheuses"}, "get", "list", "watch")},
	{"Monitoring resolution: the namespace and ServiceAccount of the Prometheus found.",
		rule("", []string{"namespaces", "serviceaccounts"}, "get")},
	{"Node count (virt-api replicas and PodDisruptionBudget): metadata-only watch.",
		rule("", []string{"nodes"}, "list", "watch")},
	{"The uninstall removes virt-handler's heartbeat annotation (kubevirt.io/heartbeat) from each node once it has cleaned virt-handler's files off it (or said why it could not): the mark of a node still to clean.",
		rule("", []string{"nodes"}, "patch")},
	{"The metrics endpoint serves only callers the API server authenticates (TokenReview of their bearer token) and authorizes (SubjectAccessReview of get on /metrics); --metrics-auth=false drops the need.",
		rule("authentication.k8s.io", []string{"tokenreviews"}, "create")},
	{"The metrics endpoint's authorization of each caller (see tokenreviews).",
		rule("authorization.k8s.io", []string{"subjectaccessreviews"}, "create")},
}

// ownNamespacedRules are what the operator does in its install namespace
// only (a Role there).
var ownNamespacedRules = []ownRule{
	{"Leader election among the replicas (Lease virt-operator).",
		rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update")},
	{"Events on the KubeVirt resource and on leader election.",
		rule("events.k8s.io", []string{"events"}, "create", "patch")},
	{"Events through the core API (leader election with older recorders).",
		rule("", []string{"events"}, "create", "patch")},
	{"Why the dump-install-strategy Job's pod does not run (unschedulable, image pull errors); what a node cleanup Job's pod said; whether virt-handler's pods are gone before the uninstall cleans their nodes.",
		rule("", []string{"pods"}, "list")},
	{"Whether virt-api really serves, probed through the API server's service proxy before the APIServices are registered.",
		rule("", []string{"services/proxy"}, "get")},
	{"OpenShift only (gated): the Route of virt-exportproxy, applied, cached, pruned and uninstalled in the install namespace only.",
		rule("route.openshift.io", []string{"routes"}, manageVerbs...)},
	{"Core kinds of the install strategy, which every release renders in the install namespace only: applied, cached, pruned and uninstalled there (ConfigMaps also hold CA bundles and install strategies). The Grafana dashboard's ConfigMap elsewhere is the ClusterRole's, by name.",
		rule("", []string{"configmaps", "serviceaccounts", "services"}, manageVerbs...)},
	{"Workloads of the install strategy (install namespace only).",
		rule("apps", []string{"daemonsets", "deployments"}, manageVerbs...)},
	{"virt-api's PodDisruptionBudget, sized by the plan (install namespace only).",
		rule("policy", []string{"poddisruptionbudgets"}, manageVerbs...)},
	{"The dump-install-strategy Job (versions outside the catalog), run and watched in the install namespace; at uninstall, a Job per node virt-handler ran on, which removes its files there.",
		rule("batch", []string{"jobs"}, "get", "list", "watch", "create", "delete")},
	{"Roles of the install strategy, which every release renders in the install namespace only. Creating one needs every permission it grants there.",
		rule("rbac.authorization.k8s.io", []string{"roles"}, manageVerbs...)},
}

// monitoringRules are the operator's rules on ServiceMonitors and
// PrometheusRules (gated on the Prometheus operator's API): placed in the
// monitoring namespace the plan resolves, any namespace, but under the
// names virtop gives them (names: ownership.Kinds.Elsewhere's, derived
// from the catalog).
func monitoringRules(names []string) []ownRule {
	named := rule("monitoring.coreos.com", []string{"prometheusrules", "servicemonitors"}, "get", "watch", "create", "patch", "delete")
	named.ResourceNames = names
	return []ownRule{
		{"Monitoring (gated): ServiceMonitors and PrometheusRules listed, label-scoped, in every namespace (prune and uninstall find virtop's where a placement put them). A list names no object.",
			rule("monitoring.coreos.com", []string{"prometheusrules", "servicemonitors"}, "list")},
		{"Monitoring (gated): KubeVirt's ServiceMonitor and PrometheusRule, placed in the monitoring namespace the plan resolves, under their one name: applied (a patch, or a create of that name), read, watched for drift (a watch with a metadata.name field selector) and deleted, by name only.",
			named},
	}
}

// configMapRules are the operator's cluster-wide rules on ConfigMaps: in
// every namespace but the install namespace (the Role's), virtop places
// only the Grafana dashboard, under its one name (names: the ConfigMaps
// ownership.Kinds.Elsewhere says virtop places, derived from the catalog).
func configMapRules(names []string) []ownRule {
	named := rule("", []string{"configmaps"}, "get", "watch", "create", "patch", "delete")
	named.ResourceNames = names
	return []ownRule{
		{"ConfigMaps in every namespace, listed: where Grafana's dashboard sidecar is (a label-scoped list of one item per candidate namespace), and the cache of the dashboard ConfigMap (a list with a metadata.name field selector, which RBAC would authorize by name, but a list names no object for the label-scoped one). The operator writes, deletes and watches no ConfigMap outside the install namespace but these by name.",
			rule("", []string{"configmaps"}, "list")},
		{"The Grafana dashboard's ConfigMap, placed beside the Grafana found: applied (server-side apply: a patch, or a create of that name), read uncached, watched (a watch with a metadata.name field selector is authorized by name) and deleted (prune, uninstall), under its one name only.",
			named},
	}
}

// strategyJobRules are what the dump-install-strategy Job's ServiceAccount
// (vocab.StrategyJobServiceAccount) may do, in the install namespace only:
// what `virtop dump-install-strategy` (internal/strategystore/pod.go)
// does, nothing more. Its Role ships with the operator's (config/rbac, the
// chart); the operator creates no RBAC of its own at run time.
var strategyJobRules = []ownRule{
	{"The strategy ConfigMap, created (a plain create; an existing one is left as it is and the operator checks its signature). No patch or update: the account can change no existing ConfigMap of the namespace (kubevirt-ca among them), and the strategy's name changes with every deployment ID, so it could not be named here. Nothing is read (no get, list or watch), and the signing key reaches the pod through a secretKeyRef the kubelet resolves: no Secret access.",
		rule("", []string{"configmaps"}, "create")},
}

// namedVerbs are what the operator does to one cluster-scoped object of
// the install strategies, which RBAC authorizes by name: get (read
// uncached: adoption's takeover, the capability snapshot's CRDs, storage
// migration), create (server-side apply of a missing object: a patch the
// API server authorizes as a create of that name; virtop issues no plain
// create of these kinds), patch (server-side apply, the takeover's
// managed-fields rewrite) and delete (prune, uninstall). No update.
var namedVerbs = []string{"get", "create", "patch", "delete"}

// clusterNamedRules are the operator's rules on the cluster-scoped kinds
// of the install strategies (namedKinds): listed and watched unnamed (the
// cache, prune and uninstall, label-scoped), and everything else by the
// names n holds, derived from the catalog by renderedNames.
func clusterNamedRules(n clusterNames) []ownRule {
	why := map[string]string{
		"rbac.authorization.k8s.io":    "ClusterRoles and ClusterRoleBindings of the install strategies, and virtop's " + vocab.MetricsReaderName + " (the plan's, bound to the Prometheus found)",
		"apiextensions.k8s.io":         "KubeVirt's CustomResourceDefinitions (uninstall deletes them once empty; storage migration reads them uncached; get on every CRD stays, as KubeVirt's grant, below)",
		"admissionregistration.k8s.io": "KubeVirt's admission webhooks and admission policies, gated ones included (virt-launcher-pod-mutator, the Plugins policies)",
		"apiregistration.k8s.io":       "virt-api's APIServices (subresources.kubevirt.io), registered once virt-api serves",
	}
	var groups []string
	byGroup := map[string][]namedKind{}
	for _, k := range namedKinds {
		if _, ok := byGroup[k.group]; !ok {
			groups = append(groups, k.group)
		}
		byGroup[k.group] = append(byGroup[k.group], k)
	}
	var out []ownRule
	for _, g := range groups {
		var resources []string
		for _, k := range byGroup[g] {
			resources = append(resources, k.resource)
		}
		slices.Sort(resources)
		out = append(out, ownRule{why[g] + ": cached, watched and listed label-scoped (prune, uninstall). RBAC cannot restrict list or watch by name: neither names an object.",
			rule(g, resources, "list", "watch")})
		for _, k := range byGroup[g] {
			r := rule(g, []string{k.resource}, namedVerbs...)
			r.ResourceNames = n.rendered[k.resource]
			out = append(out, ownRule{why[g] + ": only the objects of kind " + k.kind + " a configuration of a catalog release renders or the plan adds (names derived from the catalog by hack/rbacgen) are applied (server-side apply: a patch, or a create of that name), read uncached, taken over at adoption and deleted (prune, uninstall), by name only.", r})
		}
	}
	crds := n.rendered["customresourcedefinitions"]
	status := rule("apiextensions.k8s.io", []string{"customresourcedefinitions/status"}, "get", "patch")
	status.ResourceNames = crds
	read := rule("apiextensions.k8s.io", []string{"customresourcedefinitions"}, "get")
	read.ResourceNames = n.readCRDs
	out = append(out,
		ownRule{"Storage migration before a CRD update drops a version objects may be stored at (internal/storagemigration): the CRD's storage version moved and status.storedVersions trimmed, KubeVirt's CRDs only, by name.", status},
		ownRule{"The capability snapshot's API gates: the CRD of each optional API of another project (Prometheus operator, OpenShift) read in full, uncached, by name, to learn which versions it serves and whether it is established. Never written.", read})
	return out
}

// sccResource is OpenShift's SecurityContextConstraints, cluster-scoped.
const sccGroup, sccResource = "security.openshift.io", "securitycontextconstraints"

// sccRules are the operator's rules on SecurityContextConstraints (OpenShift
// only, gated): by name wherever RBAC allows it. names are the SCCs the
// strategies of the catalog render (generate derives them), so an SCC a
// release adds is covered by the next `make rbac`, and no other SCC of the
// cluster (privileged, restricted, another product's) can be changed or
// deleted by the operator.
func sccRules(names []string) []ownRule {
	named := rule(sccGroup, []string{sccResource}, "get", "create", "patch", "delete")
	named.ResourceNames = names
	return []ownRule{
		{"OpenShift only (gated): KubeVirt's SecurityContextConstraints, listed and watched (the cache, prune and uninstall, label-scoped). RBAC cannot restrict list or watch by name: neither names an object.",
			rule(sccGroup, []string{sccResource}, "list", "watch")},
		{"OpenShift only (gated): only the SecurityContextConstraints KubeVirt's strategies render (names derived from the catalog by hack/rbacgen) are applied, read uncached for their field managers before a prune, and deleted (prune, uninstall). Create is restricted by name too: virtop creates them only by server-side apply, a patch the API server authorizes as a create of that name (a plain POST create could not be restricted).",
			named},
	}
}

// secretRules are the operator's rules on Secrets, all in the install
// namespace (the Role): KubeVirt's certificate Secrets and virtop's strategy
// signing key live there and nowhere else. names are the Secrets the
// strategies of the catalog render (generate derives them).
func secretRules(names []string) []ownRule {
	named := rule("", []string{"secrets"}, "patch", "delete")
	named.ResourceNames = names
	return []ownRule{
		{"Secrets: cached and watched (list, watch), read uncached (get: the strategy signing key, and field managers before a prune), and the strategy signing key created. RBAC cannot restrict these by name: a list or watch names no object, a plain create is authorized before its name is known, and KubeVirt's Role kubevirt-controller grants get on every Secret of the namespace, which the operator must hold to create it.",
			rule("", []string{"secrets"}, "get", "list", "watch", "create")},
		{"Secrets by name: only the certificate Secrets KubeVirt's strategies render (names derived from the catalog by hack/rbacgen) are applied (server-side apply, authorized as a patch, or a create of that name) and deleted (prune, uninstall).",
			named},
	}
}
