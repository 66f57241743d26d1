//go:build packaging

package packaging

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ociFile reads one file of an OCI layout tarball.
func ociFile(t *testing.T, tarPath, name string) []byte {
	t.Helper()
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s: no %s", tarPath, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

func blob(t *testing.T, tarPath, digest string) []byte {
	t.Helper()
	return ociFile(t, tarPath, "blobs/"+strings.Replace(digest, ":", "/", 1))
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// TestImage opens dist/virtop-image.tar (`make image`) as an OCI layout,
// checks the config (non-root user, entrypoint, OCI labels), extracts
// /virtop from the layer and runs `virtop version`.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("the image test needs `make image`; skipped under -short (run `make test-packaging`)")
	}
	tarPath := os.Getenv("VIRTOP_IMAGE_TAR")
	if tarPath == "" {
		tarPath = filepath.Join(repoRoot(t), "dist", "virtop-image.tar")
	}
	if _, err := os.Stat(tarPath); err != nil {
		t.Fatalf("%v: build the image with `make image`", err)
	}
	if got := string(ociFile(t, tarPath, "oci-layout")); !strings.Contains(got, `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout: %s", got)
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(ociFile(t, tarPath, "index.json"), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("%d manifests in index.json, want 1", len(index.Manifests))
	}
	version := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	if version == "" {
		t.Error("index.json: no org.opencontainers.image.ref.name")
	}
	var manifest struct {
		MediaType string       `json:"mediaType"`
		Config    descriptor   `json:"config"`
		Layers    []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, tarPath, index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s", manifest.MediaType)
	}
	var config struct {
		OS     string `json:"os"`
		Config struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	}
	if err := json.Unmarshal(blob(t, tarPath, manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.OS != "linux" {
		t.Errorf("os %q", config.OS)
	}
	if config.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", config.Config.User)
	}
	if strings.Join(config.Config.Entrypoint, " ") != "/virtop" {
		t.Errorf("entrypoint %q, want [/virtop]", config.Config.Entrypoint)
	}
	if got := config.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("label org.opencontainers.image.version %q, want %q", got, version)
	}
	if got := config.Config.Labels["org.opencontainers.image.source"]; !strings.HasPrefix(got, "https://") {
		t.Errorf("label org.opencontainers.image.source %q", got)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1 (the binary alone)", len(manifest.Layers))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(blob(t, tarPath, manifest.Layers[0].Digest))))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "virtop")
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != "virtop" {
			continue
		}
		found = true
		if h.Mode&0o111 == 0 {
			t.Errorf("/virtop mode %o is not executable", h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatal("no /virtop in the image's layer")
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("virtop version from the image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "virtop "+version) {
		t.Errorf("virtop version printed %q, want the image's version %s", out, version)
	}
}
