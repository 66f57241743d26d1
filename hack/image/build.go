package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's non-root user and group (the "nonroot" of distroless).
const (
	UID  = 65532
	User = "65532:65532"
)

// Paths inside the image.
const (
	BinaryPath   = "virtop"
	CABundlePath = "etc/ssl/certs/ca-certificates.crt"
	DocDir       = "usr/share/doc/virtop"
)

// Media types of the SBOM referrer (OCI 1.1 artifact manifest).
const (
	SPDXMediaType  = "application/spdx+json"
	emptyMediaType = "application/vnd.oci.empty.v1+json"
)

// Platforms are the platforms built by default, those KubeVirt ships.
var Platforms = []string{"linux/amd64", "linux/arm64", "linux/s390x"}

// elfMachine is the ELF machine of each supported architecture.
var elfMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
	"s390x": elf.EM_S390,
}

// BuildOptions say what goes into the image.
type BuildOptions struct {
	// Binaries maps a platform ("linux/arm64") to its static virtop binary.
	Binaries map[string]string
	// Version is virtop's version: the layout's reference name and the
	// org.opencontainers.image.version label.
	Version string
	// Revision is the source commit (org.opencontainers.image.revision).
	Revision string
	// Source is the source repository URL.
	Source string
	// Repository names the image in the layout's index.json
	// (io.containerd.image.name); it is not part of the pushed content.
	Repository string
	// Created is the time of every file and of the image (reproducible
	// builds: SOURCE_DATE_EPOCH, the commit's time).
	Created time.Time
	// Docs are files copied to /usr/share/doc/virtop (LICENSE, NOTICE).
	Docs []string
	// Embedded are upstream data sets compiled into the binary, for the
	// SBOM: "name@version".
	Embedded []string
}

// Built is what Build made.
type Built struct {
	Index      v1.ImageIndex
	Digest     v1.Hash
	SBOM       []byte
	SBOMDigest v1.Hash // the referrer manifest's digest
}

func buildMain(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var binaries, docs, embedded multiFlag
	fs.Var(&binaries, "binary", "PLATFORM=FILE, a static virtop binary per platform (repeat: linux/amd64=…, linux/arm64=…)")
	fs.Var(&docs, "doc", "a file copied to /usr/share/doc/virtop (repeat: LICENSE, NOTICE)")
	fs.Var(&embedded, "embedded", "NAME@VERSION of upstream data compiled into the binary, listed in the SBOM (repeat)")
	version := fs.String("version", "", "virtop version (layout reference name, org.opencontainers.image.version)")
	revision := fs.String("revision", "", "source commit (org.opencontainers.image.revision)")
	source := fs.String("source", "https://github.com/virtop-dev/virtop", "org.opencontainers.image.source")
	repository := fs.String("repository", "ghcr.io/virtop-dev/virtop", "image repository (for the reference name in the layout's index.json)")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every file and of the image (default $SOURCE_DATE_EPOCH, else 0)")
	output := fs.String("output", "", "output tar file (OCI image layout)")
	dockerArchive := fs.String("docker-archive", "", "write the image of the one platform given as a docker-archive tar (for `ctr images import` on a node that reaches no registry), the same image as that platform's in the index")
	tagName := fs.String("tag", "", "the docker-archive's image name, REGISTRY/REPOSITORY:TAG (default REPOSITORY:VERSION)")
	sbomOut := fs.String("sbom", "", "also write the SPDX SBOM to this file")
	digestOut := fs.String("digest-file", "", "also write the index's digest (sha256:…) to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(binaries) == 0 || *version == "" || (*output == "" && *dockerArchive == "") {
		return usageError("build: -binary, -version and -output or -docker-archive are required")
	}
	if *dockerArchive != "" && len(binaries) != 1 {
		return usageError("build: -docker-archive holds one platform's image: give one -binary")
	}
	if *tagName == "" {
		*tagName = *repository + ":" + *version
	}
	var archiveTag name.Tag
	if *dockerArchive != "" {
		t, err := ParseImageName(*tagName)
		if err != nil {
			return usageError("build: -tag: " + err.Error())
		}
		archiveTag = t
	}
	o := BuildOptions{Binaries: map[string]string{}, Version: *version, Revision: *revision, Source: *source,
		Repository: *repository, Docs: docs, Embedded: embedded}
	for _, b := range binaries {
		platform, file, ok := strings.Cut(b, "=")
		if !ok || !strings.HasPrefix(platform, "linux/") {
			return usageError(fmt.Sprintf("build: -binary %q: want linux/ARCH=FILE", b))
		}
		if _, dup := o.Binaries[platform]; dup {
			return usageError(fmt.Sprintf("build: platform %s given twice", platform))
		}
		o.Binaries[platform] = file
	}
	o.Created = time.Unix(0, 0).UTC()
	if *epoch != "" {
		secs, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return usageError(fmt.Sprintf("build: -source-date-epoch %q is not a Unix time", *epoch))
		}
		o.Created = time.Unix(secs, 0).UTC()
	}
	if host, ok := o.Binaries[runtime.GOOS+"/"+runtime.GOARCH]; ok {
		releases, err := catalogOf(host)
		if err != nil {
			return err
		}
		for _, r := range releases {
			o.Embedded = append(o.Embedded, "kubevirt@"+r)
		}
	} else {
		fmt.Fprintf(os.Stderr, "image: no binary for this machine's platform %s/%s: the SBOM does not list the KubeVirt releases compiled in\n", runtime.GOOS, runtime.GOARCH)
	}
	b, err := Build(o)
	if err != nil {
		return err
	}
	if *output != "" {
		if err := WriteLayout(b, o, *output); err != nil {
			return err
		}
	}
	if *sbomOut != "" {
		if err := os.WriteFile(*sbomOut, b.SBOM, 0o644); err != nil {
			return err
		}
	}
	if *digestOut != "" {
		if err := os.WriteFile(*digestOut, []byte(b.Digest.String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	var platforms []string
	for p := range o.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	if *output != "" {
		fmt.Printf("wrote %s: image index %s (%s), user %s, entrypoint /virtop, SBOM %s\n",
			*output, b.Digest, strings.Join(platforms, ", "), User, b.SBOMDigest)
	}
	if *dockerArchive != "" {
		img, err := PlatformImage(b.Index, platforms[0])
		if err != nil {
			return err
		}
		if err := WriteArchive(img, archiveTag, *dockerArchive); err != nil {
			return err
		}
		cn, err := img.ConfigName()
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s: %s (%s image of index %s, user %s, entrypoint /virtop, image id %s)\n",
			*dockerArchive, archiveTag, platforms[0], b.Digest, User, cn)
	}
	return nil
}

// PlatformImage is the image of one platform ("linux/amd64") in the index.
func PlatformImage(idx v1.ImageIndex, platform string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.OS+"/"+m.Platform.Architecture == platform {
			return idx.Image(m.Digest)
		}
	}
	return nil, fmt.Errorf("no %s image in the index", platform)
}

// catalogOf asks a virtop binary for the KubeVirt releases whose data it
// compiles in (`virtop version -o json`).
func catalogOf(virtop string) ([]string, error) {
	out, err := exec.Command(virtop, "version", "-o", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version -o json: %w", virtop, err)
	}
	var v struct {
		KubeVirt struct {
			Catalog []string `json:"catalog"`
		} `json:"kubevirt"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("%s version -o json: %w", virtop, err)
	}
	if len(v.KubeVirt.Catalog) == 0 {
		return nil, fmt.Errorf("%s version -o json names no KubeVirt release", virtop)
	}
	return v.KubeVirt.Catalog, nil
}

// Build makes the image index and its SBOM. It reads only the files the
// options name.
func Build(o BuildOptions) (*Built, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("no binaries")
	}
	base, err := baseLayer(o)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "virtop",
		"org.opencontainers.image.description": "virtop: installs and runs the KubeVirt control plane",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	var platforms []string
	for p := range o.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var bins []binaryInfo
	for _, p := range platforms {
		arch := strings.TrimPrefix(p, "linux/")
		bin, err := os.ReadFile(o.Binaries[p])
		if err != nil {
			return nil, err
		}
		if err := checkBinary(o.Binaries[p], bin, arch); err != nil {
			return nil, err
		}
		info, err := readBinaryInfo(o.Binaries[p], bin, p)
		if err != nil {
			return nil, err
		}
		bins = append(bins, info)
		img, err := platformImage(base, bin, arch, labels, o.Created)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	sbom, err := SBOM(o, d, bins)
	if err != nil {
		return nil, err
	}
	_, sbomManifest, err := sbomReferrer(idx, sbom, o.Created)
	if err != nil {
		return nil, err
	}
	return &Built{Index: idx, Digest: d, SBOM: sbom, SBOMDigest: digestOf(sbomManifest)}, nil
}

// checkBinary refuses a binary for the wrong architecture or a dynamically
// linked one: the image has no libc.
func checkBinary(path string, bin []byte, arch string) error {
	want, ok := elfMachine[arch]
	if !ok {
		return fmt.Errorf("%s: architecture %s is not supported (want one of amd64, arm64, s390x)", path, arch)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s: built for %s, not linux/%s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (build with CGO_ENABLED=0): the image has no libc", path)
		}
	}
	return nil
}

// platformImage is one platform's image: the base layer and the binary.
func platformImage(base v1.Layer, bin []byte, arch string, labels map[string]string, created time.Time) (v1.Image, error) {
	binLayer, err := tarLayer([]tarEntry{{name: BinaryPath, mode: 0o755, data: bin}}, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, binLayer)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/virtop"}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/" + CABundlePath}
	cf.Config.Labels = labels
	cf.History = nil
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// baseLayer holds what every platform shares: the CA bundle, the user and
// group files, a world-writable /tmp and the license files.
func baseLayer(o BuildOptions) (v1.Layer, error) {
	ca, err := CABundle()
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	entries := []tarEntry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: CABundlePath, mode: 0o644, data: ca.PEM},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/share/", dir: true, mode: 0o755},
		{name: "usr/share/doc/", dir: true, mode: 0o755},
		{name: DocDir + "/", dir: true, mode: 0o755},
	}
	docs := append([]string(nil), o.Docs...)
	sort.Slice(docs, func(i, j int) bool { return filepath.Base(docs[i]) < filepath.Base(docs[j]) })
	for _, d := range docs {
		data, err := os.ReadFile(d)
		if err != nil {
			return nil, err
		}
		entries = append(entries, tarEntry{name: DocDir + "/" + filepath.Base(d), mode: 0o644, data: data})
	}
	return tarLayer(entries, o.Created)
}

type tarEntry struct {
	name string
	dir  bool
	mode int64
	uid  int
	gid  int // 0: the same as uid
	data []byte
}

// tarLayer is a gzipped OCI layer of the entries, in the order given, with
// fixed times and numeric ownership.
func tarLayer(entries []tarEntry, created time.Time) (v1.Layer, error) {
	return tarLayerOf(entries, created, types.OCILayer)
}

// tarLayerOf is tarLayer with the layer's media type.
func tarLayerOf(entries []tarEntry, created time.Time, mediaType types.MediaType) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		gid := e.gid
		if gid == 0 {
			gid = e.uid
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Uid: e.uid, Gid: gid, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(mediaType))
}

// sbomReferrer is the OCI 1.1 artifact manifest carrying the SBOM, whose
// subject is the index; it returns the empty config's bytes and the
// manifest.
func sbomReferrer(idx v1.ImageIndex, sbom []byte, created time.Time) ([]byte, []byte, error) {
	d, err := idx.Digest()
	if err != nil {
		return nil, nil, err
	}
	size, err := idx.Size()
	if err != nil {
		return nil, nil, err
	}
	emptyConfig := []byte("{}")
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SPDXMediaType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Size: int64(len(emptyConfig)), Digest: digestOf(emptyConfig), Data: emptyConfig},
		Layers: []v1.Descriptor{{MediaType: SPDXMediaType, Size: int64(len(sbom)), Digest: digestOf(sbom),
			Annotations: map[string]string{"org.opencontainers.image.title": "virtop.spdx.json"}}},
		Subject:     &v1.Descriptor{MediaType: types.OCIImageIndex, Size: size, Digest: d},
		Annotations: map[string]string{"org.opencontainers.image.created": created.Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	return emptyConfig, raw, err
}

func digestOf(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// WriteLayout writes the index and the SBOM referrer as an OCI image layout
// in a tar file: index.json lists the index (named by the version) and the
// SBOM manifest (artifactType application/spdx+json).
func WriteLayout(b *Built, o BuildOptions, output string) error {
	dir, err := os.MkdirTemp(filepath.Dir(output), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(b.Index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
		"io.containerd.image.name":          o.Repository + ":" + o.Version,
	})); err != nil {
		return err
	}
	cfg, manifest, err := sbomReferrer(b.Index, b.SBOM, o.Created)
	if err != nil {
		return err
	}
	for _, blob := range [][]byte{cfg, b.SBOM, manifest} {
		if err := p.WriteBlob(digestOf(blob), io.NopCloser(bytes.NewReader(blob))); err != nil {
			return err
		}
	}
	if err := p.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: int64(len(manifest)),
		Digest: digestOf(manifest), ArtifactType: SPDXMediaType}); err != nil {
		return err
	}
	return tarDir(dir, output)
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
	epoch := time.Unix(0, 0).UTC()
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
