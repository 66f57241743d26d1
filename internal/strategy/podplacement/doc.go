// Package podplacement places the pods of the KubeVirt components on
// nodes: it merges a placement (a node selector, affinity and tolerations,
// config.Placement) into a pod spec the way upstream's operator does at
// apply time. The control-plane components (and the dump-install-strategy
// Job) take the infra placement, virt-handler the workloads placement.
// Pure functions over a pod spec; it imports only internal/config.
package podplacement
