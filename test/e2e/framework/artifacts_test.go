package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failing suite's directory is copied under VIRTOP_E2E_ARTIFACTS, named
// after the suite's package, without the binary or symlinks.
func TestKeepArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "virtop-e2e-123")
	for name, body := range map[string]string{"logs/operator.log": "reconciled\n", "cluster-logs/kube-apiserver.log": "serving\n", "bin/virtop": "ELF"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/nowhere", filepath.Join(dir, "logs", "link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ArtifactsEnv, "")
	if got := KeepArtifacts(dir); got != dir {
		t.Errorf("unset: kept at %s, want %s", got, dir)
	}
	root := t.TempDir()
	t.Setenv(ArtifactsEnv, root)
	got := KeepArtifacts(dir)
	if want := filepath.Join(root, "test-e2e-framework-virtop-e2e-123"); got != want {
		t.Fatalf("kept at %s, want %s", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(got, "cluster-logs", "kube-apiserver.log")); err != nil || !strings.Contains(string(b), "serving") {
		t.Errorf("component log: %q, %v", b, err)
	}
	for _, name := range []string{"bin/virtop", "logs/link"} {
		if _, err := os.Lstat(filepath.Join(got, name)); err == nil {
			t.Errorf("%s was copied", name)
		}
	}
}

// With VIRTOP_E2E_VIRTOP set, the suite's binary is a copy of it.
func TestBuildVirtopCopies(t *testing.T) {
	src := filepath.Join(t.TempDir(), "virtop")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(VirtopBinaryEnv, src)
	dst := filepath.Join(t.TempDir(), "bin", "virtop")
	how, err := BuildVirtop("/nonexistent", dst)
	if err != nil || how != "copied from "+src {
		t.Fatalf("%q, %v", how, err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("copy: %v, %v", fi, err)
	}
}
