package v1

// FindCondition returns a copy of the status's condition of type typ, or
// nil when it has none. It is the one place virtop looks a KubeVirt
// condition up; Condition is its value form.
func (s *KubeVirtStatus) FindCondition(typ KubeVirtConditionType) *KubeVirtCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			c := s.Conditions[i]
			return &c
		}
	}
	return nil
}

// Condition returns the status's condition of type typ, or the zero
// KubeVirtCondition (Type "") when it has none.
func (s *KubeVirtStatus) Condition(typ KubeVirtConditionType) KubeVirtCondition {
	if c := s.FindCondition(typ); c != nil {
		return *c
	}
	return KubeVirtCondition{}
}
