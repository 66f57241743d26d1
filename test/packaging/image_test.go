//go:build packaging

package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The OCI media types the image uses.
const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	spdxJSON    = "application/spdx+json"
)

// wantPlatforms are the image's platforms: those KubeVirt ships (make's
// PLATFORMS), or the ones make test-packaging passes in
// VIRTOP_IMAGE_PLATFORMS (CI builds this machine's platform only; make
// test-all builds every one).
var wantPlatforms = platforms()

func platforms() []string {
	if v := strings.Fields(os.Getenv("VIRTOP_IMAGE_PLATFORMS")); len(v) > 0 {
		return v
	}
	return []string{"linux/amd64", "linux/arm64", "linux/s390x"}
}

type descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType"`
	Annotations  map[string]string `json:"annotations"`
	Platform     *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type indexJSON struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifestJSON struct {
	MediaType    string       `json:"mediaType"`
	ArtifactType string       `json:"artifactType"`
	Config       descriptor   `json:"config"`
	Layers       []descriptor `json:"layers"`
	Subject      *descriptor  `json:"subject"`
}

type configJSON struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// blobSource reads blobs by digest: from the layout tar or from a registry.
// Every read checks the content against its digest.
type blobSource func(t *testing.T, digest, accept string) []byte

func verified(t *testing.T, digest string, data []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		t.Fatalf("content of %s hashes to %s", digest, got)
	}
	return data
}

// tarFiles reads every regular file of a tar.
func tarFiles(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(h.Name, "/")] = data
		if h.Name == "virtop" && h.Mode&0o111 == 0 {
			t.Errorf("/virtop mode %o is not executable", h.Mode)
		}
	}
}

func imageTar(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the image tests need `make image`; skipped under -short (run `make test-packaging`)")
	}
	tarPath := os.Getenv("VIRTOP_IMAGE_TAR")
	if tarPath == "" {
		tarPath = filepath.Join(repoRoot(t), "dist", "virtop-image.tar")
	}
	if _, err := os.Stat(tarPath); err != nil {
		t.Fatalf("%v: build the image with `make image`", err)
	}
	return tarPath
}

// checkIndex checks an image index and everything it points to: three
// platforms, each non-root with the entrypoint, labels, CA bundle, user
// files, license files and a static binary of its architecture; the
// binary of this machine's platform prints the index's version. It
// returns the version.
func checkIndex(t *testing.T, get blobSource, digest string) string {
	t.Helper()
	var idx indexJSON
	if err := json.Unmarshal(get(t, digest, ociIndex), &idx); err != nil {
		t.Fatal(err)
	}
	if idx.MediaType != ociIndex {
		t.Errorf("index media type %q", idx.MediaType)
	}
	var platforms []string
	version := ""
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s has no platform", m.Digest)
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, p)
		var man manifestJSON
		if err := json.Unmarshal(get(t, m.Digest, ociManifest), &man); err != nil {
			t.Fatal(err)
		}
		var cfg configJSON
		if err := json.Unmarshal(get(t, man.Config.Digest, ""), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.OS+"/"+cfg.Architecture != p {
			t.Errorf("%s: the config says %s/%s", p, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532 (non-root)", p, cfg.Config.User)
		}
		if strings.Join(cfg.Config.Entrypoint, " ") != "/virtop" {
			t.Errorf("%s: entrypoint %q", p, cfg.Config.Entrypoint)
		}
		v := cfg.Config.Labels["org.opencontainers.image.version"]
		if version == "" {
			version = v
		} else if v != version {
			t.Errorf("%s: version label %q, another platform has %q", p, v, version)
		}
		for _, l := range []string{"org.opencontainers.image.source", "org.opencontainers.image.revision", "org.opencontainers.image.licenses", "org.opencontainers.image.created"} {
			if cfg.Config.Labels[l] == "" {
				t.Errorf("%s: no label %s", p, l)
			}
		}
		files := map[string][]byte{}
		for _, l := range man.Layers {
			zr, err := gzip.NewReader(bytes.NewReader(get(t, l.Digest, "")))
			if err != nil {
				t.Fatal(err)
			}
			for name, data := range tarFiles(t, zr) {
				files[name] = data
			}
		}
		checkFiles(t, p, files, version)
	}
	if !slices.Equal(platforms, wantPlatforms) {
		t.Errorf("platforms %v, want %v", platforms, wantPlatforms)
	}
	return version
}

var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "s390x": elf.EM_S390}

func checkFiles(t *testing.T, platform string, files map[string][]byte, version string) {
	t.Helper()
	arch := strings.TrimPrefix(platform, "linux/")
	bin := files["virtop"]
	if bin == nil {
		t.Fatalf("%s: no /virtop", platform)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: /virtop: %v", platform, err)
	}
	if f.Machine != elfMachines[arch] {
		t.Errorf("%s: /virtop is built for %s", platform, f.Machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: /virtop is dynamically linked", platform)
		}
	}
	ca := files["etc/ssl/certs/ca-certificates.crt"]
	n := 0
	for rest := ca; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Errorf("%s: CA bundle certificate %d: %v", platform, n, err)
		}
		n++
	}
	if n < 100 {
		t.Errorf("%s: %d certificates in /etc/ssl/certs/ca-certificates.crt, want over 100", platform, n)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user 65532: %q", platform, files["etc/passwd"])
	}
	for _, doc := range []string{"LICENSE", "NOTICE"} {
		if len(files["usr/share/doc/virtop/"+doc]) == 0 {
			t.Errorf("%s: no /usr/share/doc/virtop/%s", platform, doc)
		}
	}
	if arch != runtime.GOARCH {
		return
	}
	path := filepath.Join(t.TempDir(), "virtop")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version", "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("virtop version from the image: %v\n%s", err, out)
	}
	var v struct{ Version, Commit, Platform string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("virtop version -o json: %v\n%s", err, out)
	}
	if v.Version != version || v.Platform != platform || v.Commit == "" || v.Commit == "unknown" {
		t.Errorf("virtop version from the %s image: %+v, want version %s and a commit", platform, v, version)
	}
}

// checkSBOM checks the SPDX document the referrer carries.
func checkSBOM(t *testing.T, data []byte, indexDigest string) {
	t.Helper()
	var doc struct {
		SPDXVersion       string `json:"spdxVersion"`
		DocumentNamespace string `json:"documentNamespace"`
		Packages          []struct {
			Name                  string `json:"name"`
			PrimaryPackagePurpose string `json:"primaryPackagePurpose"`
			Checksums             []struct{ ChecksumValue string }
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || !strings.Contains(doc.DocumentNamespace, strings.TrimPrefix(indexDigest, "sha256:")) {
		t.Errorf("SBOM: %s, namespace %s (want SPDX-2.3 naming %s)", doc.SPDXVersion, doc.DocumentNamespace, indexDigest)
	}
	names := map[string]int{}
	for _, p := range doc.Packages {
		names[p.Name]++
	}
	for _, want := range []string{"kubevirt", "common-instancetypes", "k8s.io/client-go", "sigs.k8s.io/controller-runtime", "golang.org/x/crypto/x509roots/fallback", "stdlib"} {
		if names[want] == 0 {
			t.Errorf("the SBOM lists no %s", want)
		}
	}
	if names["virtop"] != len(wantPlatforms) {
		t.Errorf("the SBOM lists %d virtop binaries, want %d", names["virtop"], len(wantPlatforms))
	}
}

// layoutBlobs reads blobs from the layout tar.
func layoutBlobs(tarPath string) blobSource {
	return func(t *testing.T, digest, _ string) []byte {
		return verified(t, digest, ociFile(t, tarPath, "blobs/"+strings.Replace(digest, ":", "/", 1)))
	}
}

// ociFile reads one file of an OCI layout tarball.
func ociFile(t *testing.T, tarPath, name string) []byte {
	t.Helper()
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, ok := tarFiles(t, f)[name]
	if !ok {
		t.Fatalf("%s: no %s", tarPath, name)
	}
	return data
}

// layoutTop reads the layout's index.json: the image index and the SBOM.
func layoutTop(t *testing.T, tarPath string) (index, sbom descriptor) {
	t.Helper()
	if got := string(ociFile(t, tarPath, "oci-layout")); !strings.Contains(got, `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout: %s", got)
	}
	var top indexJSON
	if err := json.Unmarshal(ociFile(t, tarPath, "index.json"), &top); err != nil {
		t.Fatal(err)
	}
	for _, d := range top.Manifests {
		switch {
		case d.MediaType == ociIndex:
			index = d
		case d.ArtifactType == spdxJSON:
			sbom = d
		}
	}
	if index.Digest == "" || sbom.Digest == "" || len(top.Manifests) != 2 {
		t.Fatalf("index.json: %+v, want the image index and the SBOM", top.Manifests)
	}
	return index, sbom
}

// TestImage opens dist/virtop-image.tar (`make image`) as an OCI layout and
// checks the index, every platform's image and the SBOM referrer.
func TestImage(t *testing.T) {
	tarPath := imageTar(t)
	index, sbom := layoutTop(t, tarPath)
	get := layoutBlobs(tarPath)
	version := checkIndex(t, get, index.Digest)
	if got := index.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("index.json names the index %q, the images say %q", got, version)
	}
	if want := os.Getenv("VIRTOP_VERSION"); want != "" && version != want {
		t.Errorf("the image is version %s, make test-packaging built %s", version, want)
	}
	var m manifestJSON
	if err := json.Unmarshal(get(t, sbom.Digest, ""), &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != spdxJSON || m.Subject == nil || m.Subject.Digest != index.Digest || len(m.Layers) != 1 {
		t.Fatalf("SBOM manifest: %+v, want an %s artifact whose subject is %s", m, spdxJSON, index.Digest)
	}
	checkSBOM(t, get(t, m.Layers[0].Digest, ""), index.Digest)
}

// loopbackRegistry starts hack/image's in-memory registry on 127.0.0.1 and
// returns its host:port; it is stopped when the test ends.
func loopbackRegistry(t *testing.T) string {
	t.Helper()
	tool := filepath.Join(t.TempDir(), "image")
	build := exec.Command("go", "build", "-o", tool, ".")
	build.Dir = filepath.Join(repoRoot(t), "hack", "image")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hack/image: %v\n%s", err, out)
	}
	cmd := exec.Command(tool, "registry", "-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the registry printed no address: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("the registry says %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return addr
}

// registryBlobs reads manifests and blobs from a registry over plain HTTP,
// the distribution API by hand (independent of the library that pushed).
func registryBlobs(addr, repo string) blobSource {
	return func(t *testing.T, digest, accept string) []byte {
		t.Helper()
		kind := "blobs"
		if accept != "" {
			kind = "manifests"
		}
		return verified(t, digest, httpGet(t, fmt.Sprintf("http://%s/v2/%s/%s/%s", addr, repo, kind, digest), accept))
	}
}

func httpGet(t *testing.T, url, accept string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, data)
	}
	return data
}

// TestImagePushAndPullByDigest runs `make image-push` against a registry
// on loopback, which builds the image again from the same tree: the digest
// must be the one of `make image` (reproducible). Then it pulls everything
// back by digest and checks it as TestImage does, the SBOM found through
// the referrers API.
func TestImagePushAndPullByDigest(t *testing.T) {
	tarPath := imageTar(t)
	want, _ := layoutTop(t, tarPath)
	version := os.Getenv("VIRTOP_VERSION")
	if version == "" {
		version = want.Annotations["org.opencontainers.image.ref.name"]
	}
	addr := loopbackRegistry(t)
	dist := t.TempDir()
	push := exec.Command("make", "--no-print-directory", "-C", repoRoot(t), "image-push",
		"REGISTRY="+addr+"/virtop-dev", "VERSION="+version, "DIST="+dist, "PLATFORMS="+strings.Join(wantPlatforms, " "))
	push.Env = withoutMakeEnv(os.Environ())
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("make image-push: %v\n%s", err, out)
	}
	pushed, err := os.ReadFile(filepath.Join(dist, "virtop-image.pushed"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ref := strings.TrimSpace(string(pushed))
	repo, digest, ok := strings.Cut(ref, "@")
	if !ok || repo != addr+"/virtop-dev/virtop" {
		t.Fatalf("make image-push pushed %q, want %s/virtop-dev/virtop@sha256:…", ref, addr)
	}
	if digest != want.Digest {
		t.Errorf("built twice from the same tree, the image index is %s and then %s: the build is not reproducible", want.Digest, digest)
	}
	path := strings.TrimPrefix(repo, addr+"/")
	get := registryBlobs(addr, path)
	if v := checkIndex(t, get, digest); v != version {
		t.Errorf("pulled version %s, pushed %s", v, version)
	}
	// The tag points at the same index.
	if got := httpGet(t, fmt.Sprintf("http://%s/v2/%s/manifests/%s", addr, path, version), ociIndex); "sha256:"+sha256Hex(got) != digest {
		t.Errorf("tag %s is not %s", version, digest)
	}
	var referrers indexJSON
	if err := json.Unmarshal(httpGet(t, fmt.Sprintf("http://%s/v2/%s/referrers/%s", addr, path, digest), ""), &referrers); err != nil {
		t.Fatal(err)
	}
	if len(referrers.Manifests) != 1 {
		t.Fatalf("referrers of %s: %+v, want the SBOM", digest, referrers.Manifests)
	}
	var m manifestJSON
	if err := json.Unmarshal(get(t, referrers.Manifests[0].Digest, ociManifest), &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != spdxJSON || m.Subject == nil || m.Subject.Digest != digest || len(m.Layers) != 1 {
		t.Fatalf("referrer: %+v, want the SBOM of %s", m, digest)
	}
	checkSBOM(t, get(t, m.Layers[0].Digest, ""), digest)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
