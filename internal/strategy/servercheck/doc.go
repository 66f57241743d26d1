// Package servercheck holds the test that every object of every catalog
// strategy is accepted by a real kube-apiserver (server-side dry-run apply,
// CRDs first). It has no code of its own.
package servercheck
