package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// hello builds a small static Go program for each platform (the image
// tool only needs ELF binaries with Go build information).
func hello(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range Platforms {
		arch := strings.TrimPrefix(p, "linux/")
		bin := filepath.Join(dir, arch, "hello")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", p, err, b)
		}
		out[p] = bin
	}
	return out
}

func options(bins map[string]string) BuildOptions {
	return BuildOptions{Binaries: bins, Version: "v0.0.0-test", Revision: "0123abc", Source: "https://github.com/virtop-dev/virtop",
		Repository: "ghcr.io/virtop-dev/virtop", Created: time.Unix(1700000000, 0).UTC(),
		Embedded: []string{"kubevirt@v1.5.3", "common-instancetypes@v1.3.1"}}
}

// TestBuildReproducible: the same binaries, copied elsewhere with other
// modification times and modes, give byte-identical layout tars.
func TestBuildReproducible(t *testing.T) {
	bins := hello(t)
	copies := map[string]string{}
	dir := t.TempDir()
	for p, b := range bins {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(c, data, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-48 * time.Hour)
		if err := os.Chtimes(c, old, old); err != nil {
			t.Fatal(err)
		}
		copies[p] = c
	}
	out := t.TempDir()
	var tars [][]byte
	var digests []string
	for i, b := range []map[string]string{bins, copies} {
		o := options(b)
		built, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		tarPath := filepath.Join(out, []string{"a.tar", "b.tar"}[i])
		if err := WriteLayout(built, o, tarPath); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(tarPath)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, data)
		digests = append(digests, built.Digest.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same binaries: index digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Errorf("two builds of the same binaries wrote different layout tars (%d and %d bytes)", len(tars[0]), len(tars[1]))
	}
	// A different input does change the digest (the check can fail).
	o := options(bins)
	o.Version = "v0.0.1-test"
	other, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest.String() == digests[0] {
		t.Error("another version gave the same digest")
	}
}

func TestBuildRefusesBadBinaries(t *testing.T) {
	bins := hello(t)
	for _, tc := range []struct {
		name string
		bins map[string]string
		want string
	}{
		{"wrong architecture", map[string]string{"linux/amd64": bins["linux/arm64"]}, "not linux/amd64"},
		{"unsupported architecture", map[string]string{"linux/riscv64": bins["linux/amd64"]}, "not supported"},
		{"not ELF", map[string]string{"linux/amd64": "image_test.go"}, "not an ELF binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(options(tc.bins))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if runtime.GOARCH == "amd64" {
		if _, err := os.Stat("/bin/ls"); err == nil {
			_, err := Build(options(map[string]string{"linux/amd64": "/bin/ls"}))
			if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
				t.Errorf("Build of /bin/ls: %v, want dynamically linked", err)
			}
		}
	}
}

func TestCABundle(t *testing.T) {
	ca, err := CABundle()
	if err != nil {
		t.Fatal(err)
	}
	rest := ca.PEM
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
		n++
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("%d bytes after the last certificate", len(rest))
	}
	if n != ca.Roots || n < 100 {
		t.Errorf("%d certificates in the bundle, Roots says %d (want over 100)", n, ca.Roots)
	}
	if ca.Version == "" {
		t.Error("no version of " + CABundleModule)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Error("x509 cannot load the bundle")
	}
}

// TestSBOM: an SPDX 2.3 document whose relationships name its own
// packages, listing each binary with its checksum, the Go modules, the
// embedded data and the CA bundle.
func TestSBOM(t *testing.T) {
	built, err := Build(options(hello(t)))
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(built.SBOM, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
		t.Errorf("header: %s %s %s", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	}
	if !strings.Contains(doc.DocumentNamespace, built.Digest.Hex) {
		t.Errorf("namespace %s does not name the index digest", doc.DocumentNamespace)
	}
	ids := map[string]spdxPackage{"SPDXRef-DOCUMENT": {}}
	var names []string
	for _, p := range doc.Packages {
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = p
		names = append(names, p.Name+"@"+p.VersionInfo)
		if p.DownloadLocation == "" || p.LicenseConcluded == "" || p.LicenseDeclared == "" || p.CopyrightText == "" {
			t.Errorf("package %s lacks a required field", p.SPDXID)
		}
	}
	for _, r := range doc.Relationships {
		if _, ok := ids[r.Element]; !ok {
			t.Errorf("relationship from unknown %s", r.Element)
		}
		if _, ok := ids[r.Related]; !ok {
			t.Errorf("relationship to unknown %s", r.Related)
		}
	}
	sort.Strings(names)
	joined := strings.Join(names, " ")
	for _, want := range []string{"kubevirt@v1.5.3", "common-instancetypes@v1.3.1", CABundleModule + "@", "stdlib@go"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no package %s in %s", want, joined)
		}
	}
	binaries := 0
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose == "APPLICATION" {
			binaries++
			if len(p.Checksums) != 1 || len(p.Checksums[0].ChecksumValue) != 64 {
				t.Errorf("binary %s: checksums %v", p.SPDXID, p.Checksums)
			}
		}
	}
	if binaries != len(Platforms) {
		t.Errorf("%d binaries in the SBOM, want %d", binaries, len(Platforms))
	}
}

// TestPushAndPullByDigest pushes a layout to an in-memory registry on
// loopback and pulls it back by digest: three platforms, and the SBOM
// among the index's referrers.
func TestPushAndPullByDigest(t *testing.T) {
	o := options(hello(t))
	built, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteLayout(built, o, tarPath); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	pushed, err := Push(context.Background(), tarPath, host+"/virtop-dev/virtop", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/virtop-dev/virtop@" + built.Digest.String(); pushed != want {
		t.Errorf("pushed %s, want %s", pushed, want)
	}
	ref, err := name.NewDigest(pushed)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range im.Manifests {
		got = append(got, m.Platform.String())
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != m.Platform.String() || cf.Config.User != User {
			t.Errorf("%s: config says %s/%s user %s", m.Platform, cf.OS, cf.Architecture, cf.Config.User)
		}
	}
	if strings.Join(got, " ") != strings.Join(Platforms, " ") {
		t.Errorf("platforms %v, want %v", got, Platforms)
	}
	tagged, err := remote.Head(ref.Context().Tag(o.Version))
	if err != nil || tagged.Digest != built.Digest {
		t.Errorf("tag %s: %v %v", o.Version, tagged, err)
	}
	refs, err := remote.Referrers(ref)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// (This registry reports a referrer's artifactType from its config's
	// media type, so the manifest itself is read for it.)
	if len(rm.Manifests) != 1 || rm.Manifests[0].Digest != built.SBOMDigest {
		t.Fatalf("referrers of %s: %+v, want the SBOM %s", ref, rm.Manifests, built.SBOMDigest)
	}
	sbomRef := ref.Context().Digest(built.SBOMDigest.String())
	desc, err := remote.Get(sbomRef)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ArtifactType string
		Layers       []struct{ MediaType, Digest string }
	}
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != SPDXMediaType || len(m.Layers) != 1 {
		t.Fatalf("SBOM manifest: %s", desc.Manifest)
	}
	layer, err := remote.Layer(ref.Context().Digest(m.Layers[0].Digest))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sbom, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sbom, built.SBOM) {
		t.Errorf("the SBOM pulled back differs from the one built (%d and %d bytes)", len(sbom), len(built.SBOM))
	}
}
