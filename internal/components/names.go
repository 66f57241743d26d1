package components

// AuthDelegatorClusterRole is Kubernetes' built-in ClusterRole granting
// tokenreviews and subjectaccessreviews create; a binding to it grants what
// GrantedRules adds.
const AuthDelegatorClusterRole = "system:auth-delegator"

// PersistentReservationFeatureGate adds the pr-helper container to
// virt-handler (a variant of the release data).
const PersistentReservationFeatureGate = "PersistentReservation"
