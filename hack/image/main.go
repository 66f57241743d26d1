// Command image writes virtop's OCI image without a container engine: the
// static virtop binary as the only layer (no base image), a non-root user,
// the entrypoint and the OCI labels, saved as an OCI image layout in a tar
// file (load it with `skopeo copy oci-archive:dist/virtop-image.tar:<tag> …`
// or `podman load`). The output is reproducible: fixed timestamps and
// ownership.
//
// Usage (see `make image`):
//
//	go run . -binary ../../dist/image/virtop -version v0.1.0 \
//	  -source https://github.com/virtop-dev/virtop -repository ghcr.io/virtop-dev/virtop \
//	  -output ../../dist/virtop-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's non-root user and group (the "nonroot" of distroless).
const User = "65532:65532"

func main() {
	binary := flag.String("binary", "", "the static virtop binary (linux)")
	version := flag.String("version", "", "virtop version (image tag and org.opencontainers.image.version)")
	source := flag.String("source", "https://github.com/virtop-dev/virtop", "org.opencontainers.image.source")
	repository := flag.String("repository", "ghcr.io/virtop-dev/virtop", "image repository (for the reference name in the layout)")
	output := flag.String("output", "", "output tar file (OCI image layout)")
	arch := flag.String("arch", runtime.GOARCH, "image architecture (must match the binary)")
	flag.Parse()
	if *binary == "" || *version == "" || *output == "" {
		fmt.Fprintln(os.Stderr, "image: -binary, -version and -output are required")
		os.Exit(2)
	}
	if err := build(*binary, *version, *source, *repository, *output, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// epoch is the timestamp of every file and of the image (reproducible
// builds); SOURCE_DATE_EPOCH is not consulted to keep the tool simple.
var epoch = time.Unix(0, 0).UTC()

func build(binary, version, source, repository, output, arch string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layer, err := binaryLayer(bin)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/virtop"}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/"}
	labels := map[string]string{
		"org.opencontainers.image.title":       "virtop",
		"org.opencontainers.image.description": "virtop: installs and runs the KubeVirt control plane",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: epoch})
	if err != nil {
		return err
	}
	img = mutate.Annotations(img, labels).(v1.Image)

	dir, err := os.MkdirTemp(filepath.Dir(output), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          repository + ":" + version,
	})); err != nil {
		return err
	}
	if err := tarDir(dir, output); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s: %s:%s (%s, user %s, entrypoint /virtop)\n", output, repository, version, d, User)
	return nil
}

// binaryLayer is a layer holding /virtop (0755, root-owned, fixed time).
func binaryLayer(bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "virtop", Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarDir writes the layout directory as a tar with sorted entries and
// fixed metadata.
func tarDir(dir, output string) error {
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			files = append(files, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(files)
	tmp := output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		if st.IsDir() {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}
