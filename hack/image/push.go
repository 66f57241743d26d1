package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func pushMain(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	input := fs.String("input", "", "the OCI layout tar written by `image build`")
	repository := fs.String("repository", "", "where to push, REGISTRY/PATH (for example ghcr.io/virtop-dev/virtop)")
	tag := fs.String("tag", "", "tag to push (default: the layout's reference name, the version)")
	digestOut := fs.String("digest-file", "", "also write the pushed reference REPOSITORY@sha256:… to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *input == "" || *repository == "" {
		return usageError("push: -input and -repository are required")
	}
	ref, err := Push(context.Background(), *input, *repository, *tag, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	if *digestOut != "" {
		if err := os.WriteFile(*digestOut, []byte(ref+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Println("pushed", ref)
	return nil
}

// Layout is an OCI layout tar opened: the image index and the SBOM
// referrer's manifest.
type Layout struct {
	Path     layout.Path
	Index    v1.ImageIndex
	Version  string // the index's org.opencontainers.image.ref.name
	SBOM     []byte // the referrer manifest
	SBOMType types.MediaType
}

// OpenLayout extracts the tar into dir and finds the index and the SBOM.
func OpenLayout(tarPath, dir string) (*Layout, error) {
	if err := untar(tarPath, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	l := &Layout{Path: p}
	for _, d := range im.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			if l.Index != nil {
				return nil, fmt.Errorf("%s: more than one image index", tarPath)
			}
			if l.Index, err = top.ImageIndex(d.Digest); err != nil {
				return nil, err
			}
			l.Version = d.Annotations["org.opencontainers.image.ref.name"]
		case d.ArtifactType == SPDXMediaType:
			if l.SBOM, err = p.Bytes(d.Digest); err != nil {
				return nil, err
			}
			l.SBOMType = d.MediaType
		}
	}
	if l.Index == nil {
		return nil, fmt.Errorf("%s: no image index (build it with `make image`)", tarPath)
	}
	if l.SBOM == nil {
		return nil, fmt.Errorf("%s: no SBOM referrer", tarPath)
	}
	return l, nil
}

// rawManifest is a manifest pushed as it is.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// Push pushes the index of the layout tar to repository:tag, then its SBOM
// referrer by digest, and returns repository@digest.
func Push(ctx context.Context, tarPath, repository, tag string, opts ...remote.Option) (string, error) {
	dir, err := os.MkdirTemp("", "virtop-image-push-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	l, err := OpenLayout(tarPath, dir)
	if err != nil {
		return "", err
	}
	if tag == "" {
		tag = l.Version
	}
	if tag == "" {
		return "", fmt.Errorf("%s: no version in the layout; pass -tag", tarPath)
	}
	ref, err := name.NewTag(repository+":"+tag, name.WeakValidation)
	if err != nil {
		return "", usageError(fmt.Sprintf("push: %v", err))
	}
	opts = append(opts, remote.WithContext(ctx))
	if err := remote.WriteIndex(ref, l.Index, opts...); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := l.Index.Digest()
	if err != nil {
		return "", err
	}
	// The SBOM: its blobs, then its manifest by digest; the registry lists
	// it under the index's referrers (or ggcr keeps the fallback tag).
	var m v1.Manifest
	if err := json.Unmarshal(l.SBOM, &m); err != nil {
		return "", err
	}
	repo := ref.Context()
	for _, desc := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		data, err := l.Path.Bytes(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.WriteLayer(repo, static.NewLayer(data, desc.MediaType), opts...); err != nil {
			return "", fmt.Errorf("push the SBOM's blob %s: %w", desc.Digest, err)
		}
	}
	sbomRef := repo.Digest(digestOf(l.SBOM).String())
	if err := remote.Put(sbomRef, rawManifest{raw: l.SBOM, mt: l.SBOMType}, opts...); err != nil {
		return "", fmt.Errorf("push the SBOM: %w", err)
	}
	return repo.String() + "@" + d.String(), nil
}

// untar extracts a layout tar (regular files and directories only).
func untar(tarPath, dir string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tarPath, err)
		}
		clean := filepath.Clean(h.Name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("%s: unsafe path %q", tarPath, h.Name)
		}
		target := filepath.Join(dir, clean)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(target, buf.Bytes(), 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: %s is not a file or directory", tarPath, h.Name)
		}
	}
}
