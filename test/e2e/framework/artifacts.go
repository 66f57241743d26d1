package framework

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ArtifactsEnv names a directory where a failing suite's kept directory
// (logs, the operator's and the cluster components' logs, state) is copied,
// so that CI keeps it under dist/ (make sets it to dist/e2e/kept). Unset,
// the suite's temporary directory is kept where it is.
const ArtifactsEnv = "VIRTOP_E2E_ARTIFACTS"

// KeepArtifacts copies dir, a failing suite's directory, into a directory
// of its own under $VIRTOP_E2E_ARTIFACTS, named after the suite's package
// (test-e2e-doctor-virtop-e2e-123) and returns where it is; the built
// virtop binary (bin/) and anything but regular files and directories are
// left out. Unset, or when copying fails (said on stderr), it returns dir.
func KeepArtifacts(dir string) string {
	root := os.Getenv(ArtifactsEnv)
	if root == "" {
		return dir
	}
	dst := filepath.Join(root, suiteName()+"-"+filepath.Base(dir))
	if err := copyRegular(dir, dst); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: copying %s to %s: %v\n", dir, dst, err)
		return dir
	}
	return dst
}

// suiteName is the package's directory relative to the checkout, with
// dashes ("test-e2e-doctor"); go test runs a test binary in its package's
// directory.
func suiteName() string {
	wd, err := os.Getwd()
	if err != nil {
		return "e2e"
	}
	name := filepath.Base(wd)
	if repo := findRepo(wd); repo != "" {
		if rel, err := filepath.Rel(repo, wd); err == nil && rel != "." {
			name = rel
		}
	}
	return strings.ReplaceAll(filepath.ToSlash(name), "/", "-")
}

// findRepo returns the nearest directory at or above dir with a go.mod.
func findRepo(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func copyRegular(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "bin" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// VirtopBinaryEnv names a virtop binary built once for the run with the
// suite's own command (`go build -o … ./cmd/virtop` in the checkout; make
// test-e2e builds dist/e2e/virtop so). Unset, each suite builds its own.
const VirtopBinaryEnv = "VIRTOP_E2E_VIRTOP"

// BuildTimeout bounds a `go build` or `make` the suite runs (a cold build
// on a loaded 2-core machine takes minutes).
const BuildTimeout = 30 * time.Minute

// BuildVirtop puts a virtop binary at dst: a copy of $VIRTOP_E2E_VIRTOP
// when set, else one built from repo with `go build` (within
// BuildTimeout), its output on stdout and stderr. It returns how the
// binary came ("copied from …" or "built").
func BuildVirtop(repo, dst string) (string, error) {
	if src := os.Getenv(VirtopBinaryEnv); src != "" {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := copyFile(src, dst); err != nil {
			return "", fmt.Errorf("%s: %w", VirtopBinaryEnv, err)
		}
		return "copied from " + src, os.Chmod(dst, 0o755)
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	build := Command(ctx, "go", "build", "-o", dst, "./cmd/virtop")
	build.Dir = repo
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	return "built", CommandError(ctx, build, BuildTimeout, build.Run())
}
