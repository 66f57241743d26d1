package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// operatorOwned are the objects the operator itself depends on, by kind
// and name: its own RBAC (installed with the operator, never by the
// strategy, so a patch of it would be silently ignored), and the strategy
// objects that carry its admission webhook (which refuses deleting the
// KubeVirt resource while workloads exist). customizeComponents may not
// change them, except the webhooks' failurePolicy and timeoutSeconds (the
// local cluster sets them) and their labels and annotations.
var operatorOwned = map[string][]string{
	"ValidatingWebhookConfiguration": {vocab.OperatorValidatingWebhookName},
	"Service":                        {vocab.OperatorWebhookServiceName},
	"Secret":                         {vocab.VirtOperatorCertSecretName},
	"ServiceAccount":                 {vocab.OperatorServiceAccount},
	"ClusterRole":                    {vocab.OperatorRBACName},
	"ClusterRoleBinding":             {vocab.OperatorRBACName},
	"Role":                           {vocab.OperatorRBACName},
	"RoleBinding":                    {vocab.OperatorRBACName},
}

var (
	metadataPath = regexp.MustCompile(`^/metadata/(labels|annotations)(/.*)?$`)
	webhookTune  = regexp.MustCompile(`^/webhooks/[0-9]+/(failurePolicy|timeoutSeconds)$`)
)

// checkOperatorOwned refuses a patch that may change one of the operator's
// own objects beyond what operatorOwned allows. A patch whose type and name
// match such an object (either may be *) must confine itself to those
// fields.
func checkOperatorOwned(f string, p Patch) error {
	var targets []string
	for kind, names := range operatorOwned {
		if p.ResourceType != "*" && p.ResourceType != kind {
			continue
		}
		for _, n := range names {
			if p.ResourceName == "*" || p.ResourceName == n {
				targets = append(targets, kind+" "+n)
			}
		}
	}
	if len(targets) == 0 {
		return nil
	}
	slices.Sort(targets)
	webhooks := p.ResourceType == "ValidatingWebhookConfiguration"
	// bad is the first path outside what is allowed; "" is a path too (the
	// whole object, RFC 6901), so found says whether there is one.
	bad, found := "", false
	switch p.Type {
	case "json":
		var ops []map[string]any
		if err := json.Unmarshal([]byte(p.Patch), &ops); err != nil {
			return nil // reported by the patch's own validation
		}
		for _, op := range ops {
			path, _ := op["path"].(string)
			from, _ := op["from"].(string)
			ok := metadataPath.MatchString(path) || webhooks && webhookTune.MatchString(path)
			if from != "" {
				ok = ok && (metadataPath.MatchString(from) || webhooks && webhookTune.MatchString(from))
			}
			if !ok {
				bad, found = path, true
				break
			}
		}
	case "merge", "strategic":
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(p.Patch), &obj); err != nil {
			return nil // reported by the patch's own validation
		}
		for k, v := range obj {
			if k != "metadata" {
				bad, found = "/"+k, true
				break
			}
			md, _ := v.(map[string]any)
			for mk := range md {
				if mk != "labels" && mk != "annotations" {
					bad, found = "/metadata/"+mk, true
					break
				}
			}
		}
	}
	if !found {
		return nil
	}
	if bad == "" {
		bad = `"" (the whole object)`
	}
	allowed := "labels and annotations"
	if webhooks {
		allowed += ", and the webhooks' failurePolicy and timeoutSeconds"
	}
	return fieldErr(f, "", "would change %s at %s: these are the operator's own objects (its RBAC and admission webhook), of which a patch may change only %s",
		strings.Join(targets, ", "), bad, allowed)
}

var (
	nodeSelectorOps  = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}
	labelSelectorOps = []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
)

// validateAffinity checks what the API server would refuse in the
// components' pod templates, so that the resource, not a Deployment, is
// named: selector operators, preferred-term weights and topology keys.
func validateAffinity(field string, a *corev1.Affinity) error {
	if a == nil {
		return nil
	}
	terms := func(f string, ts []corev1.NodeSelectorTerm) error {
		for i, t := range ts {
			for k, list := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
				for j, r := range list {
					if !slices.Contains(nodeSelectorOps, r.Operator) {
						return fieldErr(fmt.Sprintf("%s[%d].%s[%d].operator", f, i, []string{"matchExpressions", "matchFields"}[k], j), string(r.Operator), "must be In, NotIn, Exists, DoesNotExist, Gt or Lt")
					}
				}
			}
		}
		return nil
	}
	if na := a.NodeAffinity; na != nil {
		f := field + ".nodeAffinity"
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			if err := terms(f+".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", req.NodeSelectorTerms); err != nil {
				return err
			}
		}
		for i, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			pf := fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d]", f, i)
			if p.Weight < 1 || p.Weight > 100 {
				return fieldErr(pf+".weight", fmt.Sprint(p.Weight), "must be between 1 and 100")
			}
			if err := terms(pf+".preference", []corev1.NodeSelectorTerm{p.Preference}); err != nil {
				return err
			}
		}
	}
	podTerm := func(f string, t corev1.PodAffinityTerm) error {
		if t.TopologyKey == "" {
			return fieldErr(f+".topologyKey", "", "must not be empty")
		}
		for _, s := range []struct {
			name string
			sel  *metav1.LabelSelector
		}{{"labelSelector", t.LabelSelector}, {"namespaceSelector", t.NamespaceSelector}} {
			if s.sel == nil {
				continue
			}
			for j, e := range s.sel.MatchExpressions {
				if !slices.Contains(labelSelectorOps, e.Operator) {
					return fieldErr(fmt.Sprintf("%s.%s.matchExpressions[%d].operator", f, s.name, j), string(e.Operator), "must be In, NotIn, Exists or DoesNotExist")
				}
			}
		}
		return nil
	}
	type podTerms struct {
		name string
		req  []corev1.PodAffinityTerm
		pref []corev1.WeightedPodAffinityTerm
	}
	var all []podTerms
	if pa := a.PodAffinity; pa != nil {
		all = append(all, podTerms{"podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	if pa := a.PodAntiAffinity; pa != nil {
		all = append(all, podTerms{"podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	for _, pa := range all {
		f := field + "." + pa.name
		for i, t := range pa.req {
			if err := podTerm(fmt.Sprintf("%s.requiredDuringSchedulingIgnoredDuringExecution[%d]", f, i), t); err != nil {
				return err
			}
		}
		for i, w := range pa.pref {
			pf := fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d]", f, i)
			if w.Weight < 1 || w.Weight > 100 {
				return fieldErr(pf+".weight", fmt.Sprint(w.Weight), "must be between 1 and 100")
			}
			if err := podTerm(pf+".podAffinityTerm", w.PodAffinityTerm); err != nil {
				return err
			}
		}
	}
	return nil
}
