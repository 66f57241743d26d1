package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestMain runs the command itself when the tests re-execute their own
// binary with IMAGE_TEST_MAIN=1, so exit codes and messages are tested as
// a caller sees them.
func TestMain(m *testing.M) {
	if os.Getenv("IMAGE_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runImage runs `image ARGS...` and returns its exit code and stderr.
func runImage(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "IMAGE_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

func hostArch(t *testing.T) string {
	t.Helper()
	if _, ok := elfMachine[runtime.GOARCH]; !ok || runtime.GOOS != "linux" {
		t.Skipf("peer images are built for linux/amd64, arm64 or s390x, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return runtime.GOARCH
}

func peerOptions(bin, arch string) PeerOptions {
	return PeerOptions{Binary: bin, Name: "quay.io/kubevirt/virt-api:v1.9.0", User: "1001", Arch: arch,
		Created: time.Unix(1700000000, 0).UTC(), Labels: map[string]string{"org.opencontainers.image.revision": "0123abc"}}
}

// files is an image's flattened file system: each entry's header and
// content.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

func fileContent(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no %s in the image", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// TestPeerRoundTrip writes a peer image as a docker-archive, reads it back
// the way a docker-archive importer does, and checks its name, user,
// files and entrypoint; the binary taken out of it runs. Written twice
// from copies of the binary with other times, the archive is the same
// bytes.
func TestPeerRoundTrip(t *testing.T) {
	arch := hostArch(t)
	bin := hello(t)["linux/"+arch]
	dir := t.TempDir()
	// A copy with another modification time and mode, under the command's
	// name.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, "virt-api")
	if err := os.WriteFile(copyBin, data, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour)
	if err := os.Chtimes(copyBin, old, old); err != nil {
		t.Fatal(err)
	}
	origBin := filepath.Join(t.TempDir(), "virt-api")
	if err := os.WriteFile(origBin, data, 0o755); err != nil {
		t.Fatal(err)
	}

	var archives [][]byte
	for i, b := range []string{origBin, copyBin} {
		o := peerOptions(b, arch)
		img, tag, err := Peer(o)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, []string{"a.tar", "b.tar"}[i])
		if err := WriteArchive(img, tag, out); err != nil {
			t.Fatal(err)
		}
		a, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, a)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds of the same binary wrote different archives (%d and %d bytes)", len(archives[0]), len(archives[1]))
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp.*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}

	archive := filepath.Join(dir, "a.tar")
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "quay.io/kubevirt/virt-api:v1.9.0" {
		t.Fatalf("manifest.json: %+v, want one image tagged quay.io/kubevirt/virt-api:v1.9.0", m)
	}
	tag, err := name.NewTag("quay.io/kubevirt/virt-api:v1.9.0")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "1001" || cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("config: user %q, platform %s/%s; want 1001, linux/%s", cf.Config.User, cf.OS, cf.Architecture, arch)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/usr/bin/virt-api" || strings.Join(cf.Config.Env, " ") != PeerPATH {
		t.Errorf("config: entrypoint %q, env %q", cf.Config.Entrypoint, cf.Config.Env)
	}
	if !cf.Created.Time.Equal(time.Unix(1700000000, 0)) || cf.Config.Labels["org.opencontainers.image.revision"] != "0123abc" {
		t.Errorf("config: created %s, labels %v", cf.Created.Time, cf.Config.Labels)
	}
	fs := files(t, img)
	for p, want := range map[string]int64{"usr/bin/virt-api": 0o755, "tmp": 0o1777, "etc/passwd": 0o644, "etc/group": 0o644, "home/nonroot-user": 0o700} {
		h, ok := fs[p]
		if !ok {
			t.Errorf("no /%s in the image", p)
			continue
		}
		if h.Mode&0o7777 != want {
			t.Errorf("/%s: mode %o, want %o", p, h.Mode&0o7777, want)
		}
		if !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("/%s: time %s", p, h.ModTime)
		}
	}
	if h := fs["home/nonroot-user"]; h != nil && (h.Uid != 1001 || h.Gid != 1001) {
		t.Errorf("/home/nonroot-user owned by %d:%d, want 1001:1001", h.Uid, h.Gid)
	}
	if p := string(fileContent(t, img, "etc/passwd")); !strings.Contains(p, "\nnonroot-user:x:1001:1001:") {
		t.Errorf("/etc/passwd has no nonroot-user 1001:\n%s", p)
	}
	if g := string(fileContent(t, img, "etc/group")); !strings.Contains(g, "\nnonroot-user:x:1001:") {
		t.Errorf("/etc/group has no group 1001:\n%s", g)
	}
	got := fileContent(t, img, "usr/bin/virt-api")
	if !bytes.Equal(got, data) {
		t.Fatalf("/usr/bin/virt-api: %d bytes, not the binary's %d", len(got), len(data))
	}
	extracted := filepath.Join(t.TempDir(), "virt-api")
	if err := os.WriteFile(extracted, got, os.FileMode(fs["usr/bin/virt-api"].Mode&0o777)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(extracted).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Errorf("the binary taken out of the image: %v, %q", err, out)
	}

	// Another user, name or binary path changes the image (the checks above
	// can fail).
	o := peerOptions(origBin, arch)
	o.User, o.UserName, o.Path, o.Name = "65535:65535", "pause", "/pause", "registry.k8s.io/pause:3.10"
	other, _, err := Peer(o)
	if err != nil {
		t.Fatal(err)
	}
	ocf, err := other.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ofs := files(t, other)
	if ocf.Config.User != "65535:65535" || ocf.Config.Entrypoint[0] != "/pause" || ofs["pause"] == nil || ofs["usr/bin/virt-api"] != nil {
		t.Errorf("pause image: user %q, entrypoint %q, files %v", ocf.Config.User, ocf.Config.Entrypoint, ofs)
	}
}

// TestPeerRefusesBadInput: each bad input is refused with an error that
// names what is wrong, by Peer and by the command (exit 1, or 2 for a
// missing flag), and no archive is written.
func TestPeerRefusesBadInput(t *testing.T) {
	arch := hostArch(t)
	bins := hello(t)
	good := bins["linux/"+arch]
	wrongArch := bins["linux/s390x"]
	if arch == "s390x" {
		wrongArch = bins["linux/amd64"]
	}
	for _, tc := range []struct {
		name   string
		change func(*PeerOptions)
		want   string
	}{
		{"missing binary", func(o *PeerOptions) { o.Binary = filepath.Join(t.TempDir(), "virt-api") }, "no such file"},
		{"not ELF", func(o *PeerOptions) { o.Binary = "peer_test.go" }, "not an ELF binary"},
		{"wrong architecture", func(o *PeerOptions) { o.Binary = wrongArch }, "not linux/" + arch},
		{"unsupported architecture", func(o *PeerOptions) { o.Arch = "riscv64" }, "not supported"},
		{"no registry", func(o *PeerOptions) { o.Name = "kubevirt/virt-api:v1.9.0" }, "fully qualified"},
		{"no tag", func(o *PeerOptions) { o.Name = "quay.io/kubevirt/virt-api" }, "fully qualified"},
		{"upper case", func(o *PeerOptions) { o.Name = "quay.io/KubeVirt/virt-api:v1.9.0" }, "fully qualified"},
		{"digest", func(o *PeerOptions) { o.Name = "quay.io/kubevirt/virt-api@sha256:" + strings.Repeat("0", 64) }, "not a digest"},
		{"docker hub short", func(o *PeerOptions) { o.Name = "docker.io/busybox:1" }, "missing 'library'"},
		{"docker hub legacy", func(o *PeerOptions) { o.Name = "index.docker.io/library/busybox:1" }, "containerd names it docker.io/library/busybox:1"},
		{"user name", func(o *PeerOptions) { o.User = "nonroot" }, "numeric"},
		{"root", func(o *PeerOptions) { o.User = "0" }, "is root"},
		{"root with group", func(o *PeerOptions) { o.User = "0:1001" }, "is root"},
		{"relative path", func(o *PeerOptions) { o.Path = "usr/bin/virt-api" }, "absolute"},
		{"path in /etc", func(o *PeerOptions) { o.Path = "/etc/passwd" }, "outside /etc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := peerOptions(good, arch)
			tc.change(&o)
			_, _, err := Peer(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Peer: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if arch == "amd64" {
		if _, err := os.Stat("/bin/ls"); err == nil {
			_, _, err := Peer(peerOptions("/bin/ls", arch))
			if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
				t.Errorf("Peer of /bin/ls: %v, want dynamically linked", err)
			}
		}
	}

	// The command: a clear message on stderr, a non-zero exit, no output
	// file.
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing binary", []string{"-binary", "/nonexistent/virt-api", "-name", "quay.io/kubevirt/virt-api:v1.9.0", "-user", "1001"}, 1, "/nonexistent/virt-api: no such file"},
		{"not ELF", []string{"-binary", "peer_test.go", "-name", "quay.io/kubevirt/virt-api:v1.9.0", "-user", "1001"}, 1, "peer_test.go: not an ELF binary"},
		{"wrong architecture", []string{"-binary", wrongArch, "-name", "quay.io/kubevirt/virt-api:v1.9.0", "-user", "1001"}, 1, "not linux/" + arch},
		{"invalid name", []string{"-binary", good, "-name", "virt-api", "-user", "1001"}, 1, `image name "virt-api"`},
		{"missing flag", []string{"-binary", good, "-name", "quay.io/kubevirt/virt-api:v1.9.0"}, 2, "-user"},
	} {
		t.Run("command "+tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.tar")
			code, stderr := runImage(t, append([]string{"peer", "-output", out}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("image peer: exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s written after an error", out)
			}
		})
	}
}

// fakeVirtop builds a static program for this machine that answers
// `version -o json` the way virtop does (buildMain asks it for the catalog).
func fakeVirtop(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(`{\"kubevirt\":{\"catalog\":[\"v1.9.0\"]}}`) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/virtop\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "virtop")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return bin
}

// TestBuildDockerArchive: `image build -docker-archive` writes the very
// image the index holds for that platform (the same config, so the same
// image id: virtop's operator image as `make image` builds it), named by
// -tag.
func TestBuildDockerArchive(t *testing.T) {
	arch := hostArch(t)
	bin := fakeVirtop(t)
	o := options(map[string]string{"linux/" + arch: bin})
	built, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := PlatformImage(built.Index, "linux/"+arch)
	if err != nil {
		t.Fatal(err)
	}
	wantID, err := want.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "virtop.tar")
	code, stderr := runImage(t, "build", "-binary", "linux/"+arch+"="+bin, "-version", o.Version,
		"-revision", o.Revision, "-source", o.Source, "-source-date-epoch", "1700000000",
		"-docker-archive", archive, "-tag", "ghcr.io/virtop-dev/virtop:test")
	if code != 0 {
		t.Fatalf("image build -docker-archive: exit %d: %s", code, stderr)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || strings.Join(m[0].RepoTags, " ") != "ghcr.io/virtop-dev/virtop:test" {
		t.Fatalf("manifest.json: %+v", m)
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if id != wantID {
		t.Errorf("archive image id %s, the index's linux/%s image %s", id, arch, wantID)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, img)
	if cf.Config.User != User || fs["virtop"] == nil || fs[CABundlePath] == nil || fs["etc/passwd"] == nil || fs["tmp"] == nil {
		t.Errorf("operator image: user %q, files %v", cf.Config.User, fs)
	}
	bins := hello(t)
	code, stderr = runImage(t, "build", "-binary", "linux/amd64="+bins["linux/amd64"], "-binary", "linux/arm64="+bins["linux/arm64"],
		"-version", "v0", "-docker-archive", archive)
	if code != 2 || !strings.Contains(stderr, "give one -binary") {
		t.Errorf("two platforms into a docker-archive: exit %d, %q", code, stderr)
	}
	code, stderr = runImage(t, "build", "-binary", "linux/"+arch+"="+bin, "-version", "v0", "-docker-archive", archive, "-tag", "virtop:v0")
	if code != 2 || !strings.Contains(stderr, `image name "virtop:v0"`) {
		t.Errorf("-tag virtop:v0: exit %d, %q", code, stderr)
	}
}

// TestParseImageName: the names containerd keeps as they are pass.
func TestParseImageName(t *testing.T) {
	for _, s := range []string{"quay.io/kubevirt/virt-api:v1.9.0", "registry.k8s.io/pause:3.10", "docker.io/library/busybox:1",
		"localhost:5000/kubevirt/virt-api:v1.9.0", "ghcr.io/virtop-dev/virtop:v0.1.0-dev-3-gabc"} {
		if _, err := ParseImageName(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
