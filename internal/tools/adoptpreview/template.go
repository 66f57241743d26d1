package adoptpreview

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
)

// Change is one field of a pod template the takeover would change. Paths
// start at spec.template; list items are named by their name
// (containers[name=virt-api]) or their index.
type Change struct {
	Path string `json:"path"`
	// Live and Planned are compact JSON; "" is absent.
	Live    string `json:"live"`
	Planned string `json:"planned"`
}

func (c Change) String() string {
	return c.Path + ": " + orAbsent(c.Live) + " → " + orAbsent(c.Planned)
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// templateChanges compares a workload's planned pod template with the
// live one as virtop's apply would leave it. After the takeover virtop's
// field manager owns every field upstream's did, so its apply sets what
// the plan holds and removes what only the live template holds; a removed
// field the API server defaults comes back with its default, so a live
// field holding the default is no change (serverDefault).
func templateChanges(planned client.Object, live *unstructured.Unstructured) ([]Change, error) {
	want, err := apply.Desired(planned)
	if err != nil {
		return nil, err
	}
	w, _, _ := unstructured.NestedFieldNoCopy(want.Object, "spec", "template")
	l, _, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "template")
	var out []Change
	compareValues("spec.template", nil, l, w, &out)
	if len(out) > 0 {
		return out, nil
	}
	return nil, nil
}

// compareValues appends the changes from live to planned under path;
// field names the last map key on the way (for serverDefault).
func compareValues(path string, fields []string, live, planned interface{}, out *[]Change) {
	switch {
	case isEmpty(live) && isEmpty(planned):
		return
	case isEmpty(planned):
		if serverDefault(fields, live) {
			return
		}
		*out = append(*out, Change{Path: path, Live: compact(live)})
		return
	case isEmpty(live):
		*out = append(*out, Change{Path: path, Planned: compact(planned)})
		return
	}
	switch p := planned.(type) {
	case map[string]interface{}:
		if l, ok := live.(map[string]interface{}); ok {
			keys := make([]string, 0, len(p)+len(l))
			for k := range p {
				keys = append(keys, k)
			}
			for k := range l {
				if _, ok := p[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				if k == "serviceAccount" && isEmpty(p[k]) && l[k] == l["serviceAccountName"] {
					// The deprecated alias the API server copies from
					// serviceAccountName.
					continue
				}
				compareValues(child(path, k), append(fields[:len(fields):len(fields)], k), l[k], p[k], out)
			}
			return
		}
	case []interface{}:
		if l, ok := live.([]interface{}); ok {
			compareLists(path, fields, l, p, out)
			return
		}
	}
	if !apply.Contains(live, planned) {
		*out = append(*out, Change{Path: path, Live: compact(live), Planned: compact(planned)})
	}
}

// compareLists matches items by name when every item of both has one,
// else by index.
func compareLists(path string, fields []string, live, planned []interface{}, out *[]Change) {
	ln, lok := names(live)
	pn, pok := names(planned)
	if !lok || !pok {
		for i := 0; i < max(len(live), len(planned)); i++ {
			var l, p interface{}
			if i < len(live) {
				l = live[i]
			}
			if i < len(planned) {
				p = planned[i]
			}
			compareValues(path+"["+strconv.Itoa(i)+"]", fields, l, p, out)
		}
		return
	}
	byName := map[string]interface{}{}
	for i, n := range ln {
		byName[n] = live[i]
	}
	seen := map[string]bool{}
	for i, n := range pn {
		seen[n] = true
		compareValues(path+"[name="+n+"]", fields, byName[n], planned[i], out)
	}
	for i, n := range ln {
		if !seen[n] {
			compareValues(path+"[name="+n+"]", fields, live[i], nil, out)
		}
	}
}

func names(l []interface{}) ([]string, bool) {
	out := make([]string, 0, len(l))
	for _, it := range l {
		m, ok := it.(map[string]interface{})
		if !ok {
			return nil, false
		}
		n, _ := m["name"].(string)
		if n == "" {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func child(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return path + "[" + key + "]"
	}
	return path + "." + key
}

func isEmpty(v interface{}) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]interface{}:
		return len(x) == 0
	case []interface{}:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

// defaults are the values the API server gives a pod template's fields
// when they are unset, by the field's name and its parent's (Kubernetes'
// defaulting of PodSpec, Container, Probe, volumes and ports). Only
// fields a template may leave unset and the server then fills are here.
var defaults = map[string]interface{}{
	"spec.restartPolicy":                      "Always",
	"spec.dnsPolicy":                          "ClusterFirst",
	"spec.schedulerName":                      "default-scheduler",
	"spec.terminationGracePeriodSeconds":      int64(30),
	"containers.terminationMessagePath":       "/dev/termination-log",
	"containers.terminationMessagePolicy":     "File",
	"initContainers.terminationMessagePath":   "/dev/termination-log",
	"initContainers.terminationMessagePolicy": "File",
	"ports.protocol":                          "TCP",
	"httpGet.scheme":                          "HTTP",
	"livenessProbe.timeoutSeconds":            int64(1),
	"livenessProbe.periodSeconds":             int64(10),
	"livenessProbe.successThreshold":          int64(1),
	"livenessProbe.failureThreshold":          int64(3),
	"readinessProbe.timeoutSeconds":           int64(1),
	"readinessProbe.periodSeconds":            int64(10),
	"readinessProbe.successThreshold":         int64(1),
	"readinessProbe.failureThreshold":         int64(3),
	"startupProbe.timeoutSeconds":             int64(1),
	"startupProbe.periodSeconds":              int64(10),
	"startupProbe.successThreshold":           int64(1),
	"startupProbe.failureThreshold":           int64(3),
	"secret.defaultMode":                      int64(420),
	"configMap.defaultMode":                   int64(420),
	"projected.defaultMode":                   int64(420),
	"downwardAPI.defaultMode":                 int64(420),
	"fieldRef.apiVersion":                     "v1",
}

// serverDefault reports whether a live field the plan does not hold has
// the value the API server would give it again.
func serverDefault(fields []string, live interface{}) bool {
	if len(fields) < 2 {
		return false
	}
	name := fields[len(fields)-2] + "." + fields[len(fields)-1]
	if d, ok := defaults[name]; ok {
		return apply.Contains(live, d)
	}
	if name == "containers.imagePullPolicy" || name == "initContainers.imagePullPolicy" {
		// KubeVirt's images are pinned by tag or digest: IfNotPresent.
		return live == "IfNotPresent"
	}
	return false
}

// compact is a value as short JSON, cut at 80 characters.
func compact(v interface{}) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
