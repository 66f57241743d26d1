package doctor

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// peer is a traffic source: a pod in a namespace.
type peer struct {
	Namespace       string
	NamespaceLabels map[string]string
	// NamespaceKnown is false when the namespace's labels were not read.
	NamespaceKnown bool
	PodLabels      map[string]string
	// IP is empty when unknown.
	IP string
}

// destPort is a destination port of a pod.
type destPort struct {
	Name   string
	Number int32
}

// ingressVerdict is the outcome of evaluating NetworkPolicies for one
// connection.
type ingressVerdict struct {
	// Isolated: some policy of type Ingress selects the pod.
	Isolated bool
	// Allowed: some selecting policy admits the connection (true when not
	// isolated).
	Allowed bool
	// Undecided: an ipBlock rule might admit it but the source IP is not
	// known.
	Undecided bool
	// Selecting names the policies that select the pod.
	Selecting []string
	// DenyAll names selecting policies without any ingress rule.
	DenyAll []string
}

// policyAppliesToIngress follows the API's defaulting: Ingress is always a
// policy type unless policyTypes lists only Egress.
func policyAppliesToIngress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return true
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

func podSelectorMatches(sel metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

// evalIngress evaluates the policies of the pod's namespace for a
// connection from src to the pod's port.
func evalIngress(policies []networkingv1.NetworkPolicy, pod *corev1.Pod, src peer, port destPort) ingressVerdict {
	v := ingressVerdict{}
	for i := range policies {
		p := &policies[i]
		if p.Namespace != pod.Namespace || !policyAppliesToIngress(p) || !podSelectorMatches(p.Spec.PodSelector, pod.Labels) {
			continue
		}
		v.Isolated = true
		v.Selecting = append(v.Selecting, p.Name)
		if len(p.Spec.Ingress) == 0 {
			v.DenyAll = append(v.DenyAll, p.Name)
			continue
		}
		for _, rule := range p.Spec.Ingress {
			if !portsAllow(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				v.Allowed = true
				continue
			}
			for _, from := range rule.From {
				switch peerAllows(from, p.Namespace, src) {
				case yes:
					v.Allowed = true
				case maybe:
					v.Undecided = true
				}
			}
		}
	}
	if !v.Isolated {
		v.Allowed = true
	}
	return v
}

type tri int

const (
	no tri = iota
	yes
	maybe
)

func peerAllows(from networkingv1.NetworkPolicyPeer, policyNS string, src peer) tri {
	if from.IPBlock != nil {
		_, cidr, err := net.ParseCIDR(from.IPBlock.CIDR)
		if err != nil {
			return no
		}
		if ones, _ := cidr.Mask.Size(); ones == 0 && len(from.IPBlock.Except) == 0 {
			return yes // 0.0.0.0/0 or ::/0
		}
		if src.IP == "" {
			return maybe
		}
		ip := net.ParseIP(src.IP)
		if ip == nil || !cidr.Contains(ip) {
			return no
		}
		for _, e := range from.IPBlock.Except {
			if _, ex, err := net.ParseCIDR(e); err == nil && ex.Contains(ip) {
				return no
			}
		}
		return yes
	}
	nsOK := tri(no)
	switch {
	case from.NamespaceSelector == nil:
		if src.Namespace == policyNS {
			nsOK = yes
		}
	case len(from.NamespaceSelector.MatchLabels) == 0 && len(from.NamespaceSelector.MatchExpressions) == 0:
		nsOK = yes
	case !src.NamespaceKnown:
		nsOK = maybe
	case podSelectorMatches(*from.NamespaceSelector, src.NamespaceLabels):
		nsOK = yes
	}
	if nsOK == no {
		return no
	}
	if from.PodSelector != nil && !podSelectorMatches(*from.PodSelector, src.PodLabels) {
		return no
	}
	return nsOK
}

func portsAllow(ports []networkingv1.NetworkPolicyPort, port destPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		switch p.Port.Type {
		case intstr.String:
			if p.Port.StrVal == port.Name && port.Name != "" {
				return true
			}
		case intstr.Int:
			lo, hi := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if port.Number >= lo && port.Number <= hi {
				return true
			}
		}
	}
	return false
}
