package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PeerPATH is a peer image's PATH: the one distroless images set, which
// upstream KubeVirt's images inherit. The Deployments name their command
// without a directory ("virt-api"), so the runtime looks it up there.
const PeerPATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultPeerUserName is the passwd name of upstream KubeVirt's user
// (passwd_entry "nonroot-user" in its top-level BUILD.bazel).
const DefaultPeerUserName = "nonroot-user"

// PeerOptions say what goes into a peer image: one static binary, the
// user it runs as and nothing else. Peer images are what a machine that
// reaches no registry runs in place of a published image (upstream
// KubeVirt's components built from source, the pod sandbox's pause).
type PeerOptions struct {
	// Binary is the static ELF binary.
	Binary string
	// Path is where it goes in the image (default /usr/bin/<its file
	// name>); it is also the entrypoint.
	Path string
	// Name is the image's name, REGISTRY/REPOSITORY:TAG, fully qualified
	// (the manifest.json RepoTag, the name `ctr images import` gives it).
	Name string
	// User is the image config's User: "UID" or "UID:GID", numeric, not 0
	// (pods with runAsNonRoot and no runAsUser take it from here).
	User string
	// UserName is the user's name in /etc/passwd and /etc/group.
	UserName string
	// Arch is the binary's and the image's architecture (amd64, arm64,
	// s390x).
	Arch string
	// Created is the time of every file and of the image.
	Created time.Time
	// Labels are added to the image config.
	Labels map[string]string
}

func peerMain(args []string) error {
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	var labels multiFlag
	binary := fs.String("binary", "", "the static binary the image runs")
	imageName := fs.String("name", "", "the image's name, REGISTRY/REPOSITORY:TAG, fully qualified")
	user := fs.String("user", "", "the user the image runs as: UID or UID:GID, numeric and not 0")
	userName := fs.String("username", DefaultPeerUserName, "the user's name in /etc/passwd and /etc/group")
	at := fs.String("path", "", "where the binary goes in the image (default /usr/bin/<its file name>); also the entrypoint")
	arch := fs.String("arch", runtime.GOARCH, "the binary's architecture: amd64, arm64 or s390x")
	fs.Var(&labels, "label", "KEY=VALUE added to the image config's labels (repeat)")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every file and of the image (default $SOURCE_DATE_EPOCH, else 0)")
	output := fs.String("output", "", "output tar file (docker-archive: manifest.json with RepoTags, for `ctr images import` and `docker load`)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *binary == "" || *imageName == "" || *user == "" || *output == "" {
		return usageError("peer: -binary, -name, -user and -output are required")
	}
	o := PeerOptions{Binary: *binary, Path: *at, Name: *imageName, User: *user, UserName: *userName, Arch: *arch,
		Labels: map[string]string{}}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return usageError(fmt.Sprintf("peer: -label %q: want KEY=VALUE", l))
		}
		o.Labels[k] = v
	}
	created, err := parseEpoch(*epoch)
	if err != nil {
		return usageError("peer: " + err.Error())
	}
	o.Created = created
	img, tag, err := Peer(o)
	if err != nil {
		return err
	}
	if err := WriteArchive(img, tag, *output); err != nil {
		return err
	}
	cn, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (linux/%s, user %s, %s, image id %s)\n",
		*output, tag, o.Arch, cf.Config.User, cf.Config.Entrypoint[0], cn)
	return nil
}

// parseEpoch reads a Unix time; "" is 0.
func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("-source-date-epoch %q is not a Unix time", s)
	}
	return time.Unix(secs, 0).UTC(), nil
}

var (
	numericUser = regexp.MustCompile(`^([0-9]+)(?::([0-9]+))?$`)
	userName    = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
)

// ParseImageName checks that s names an image the way containerd will
// name it on import: an explicit registry, repository and tag, and no
// digest.
func ParseImageName(s string) (name.Tag, error) {
	if strings.Contains(s, "@") {
		return name.Tag{}, fmt.Errorf("image name %q: want REGISTRY/REPOSITORY:TAG, not a digest", s)
	}
	t, err := name.NewTag(s, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image name %q: want REGISTRY/REPOSITORY:TAG, fully qualified: %w", s, err)
	}
	// The name containerd gives it (Docker Hub's is docker.io/…).
	canonical := t.Name()
	if t.RegistryStr() == name.DefaultRegistry {
		canonical = "docker.io/" + t.RepositoryStr() + ":" + t.TagStr()
	}
	if canonical != s {
		return name.Tag{}, fmt.Errorf("image name %q: containerd names it %s; give that name", s, canonical)
	}
	return t, nil
}

// Peer makes the image: a layer with /etc/passwd, /etc/group, the user's
// home and a world-writable /tmp, and a layer with the binary. Fixed
// times, ownership and order: the same binary and options give the same
// image.
func Peer(o PeerOptions) (v1.Image, name.Tag, error) {
	var none name.Tag
	tag, err := ParseImageName(o.Name)
	if err != nil {
		return nil, none, err
	}
	m := numericUser.FindStringSubmatch(o.User)
	if m == nil {
		return nil, none, fmt.Errorf("user %q: want a numeric UID or UID:GID (pods with runAsNonRoot and no runAsUser need a numeric user)", o.User)
	}
	uid, err := strconv.Atoi(m[1])
	if err != nil || uid > 1<<31-2 {
		return nil, none, fmt.Errorf("user %q: UID out of range", o.User)
	}
	gid := uid
	if m[2] != "" {
		if gid, err = strconv.Atoi(m[2]); err != nil || gid > 1<<31-2 {
			return nil, none, fmt.Errorf("user %q: GID out of range", o.User)
		}
	}
	if uid == 0 {
		return nil, none, fmt.Errorf("user %q is root: a peer image runs as a non-root user", o.User)
	}
	if o.UserName == "" {
		o.UserName = DefaultPeerUserName
	}
	if !userName.MatchString(o.UserName) || o.UserName == "root" {
		return nil, none, fmt.Errorf("user name %q: want a lower-case name other than root", o.UserName)
	}
	if o.Path == "" {
		o.Path = "/usr/bin/" + filepath.Base(o.Binary)
	}
	if !path.IsAbs(o.Path) || path.Clean(o.Path) != o.Path || o.Path == "/" ||
		strings.HasPrefix(o.Path, "/etc/") || strings.HasPrefix(o.Path, "/tmp/") || strings.HasPrefix(o.Path, "/home/") {
		return nil, none, fmt.Errorf("path %q: want a clean absolute path outside /etc, /tmp and /home", o.Path)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, none, fmt.Errorf("binary: %w", err)
	}
	if err := checkBinary(o.Binary, bin, o.Arch); err != nil {
		return nil, none, err
	}

	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", o.UserName, uid, gid, o.UserName, o.UserName)
	group := "root:x:0:\n"
	if gid != 0 {
		group += fmt.Sprintf("%s:x:%d:\n", o.UserName, gid)
	}
	base, err := tarLayerOf([]tarEntry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/" + o.UserName + "/", dir: true, mode: 0o700, uid: uid, gid: gid},
		{name: "tmp/", dir: true, mode: 0o1777},
	}, o.Created, types.DockerLayer)
	if err != nil {
		return nil, none, err
	}
	var binEntries []tarEntry
	rel := strings.TrimPrefix(o.Path, "/")
	for i := range rel {
		if rel[i] == '/' {
			binEntries = append(binEntries, tarEntry{name: rel[:i+1], dir: true, mode: 0o755})
		}
	}
	binEntries = append(binEntries, tarEntry{name: rel, mode: 0o755, data: bin})
	binLayer, err := tarLayerOf(binEntries, o.Created, types.DockerLayer)
	if err != nil {
		return nil, none, err
	}
	img, err := runnable(tag, runConfig{Arch: o.Arch, Created: o.Created, User: o.User, Entrypoint: o.Path, Labels: o.Labels}, base, binLayer)
	if err != nil {
		return nil, none, err
	}
	return img, tag, nil
}

// runConfig is what a peer or rootfs image runs as: the configuration both
// kinds of image share.
type runConfig struct {
	Arch       string
	Created    time.Time
	User       string
	Entrypoint string
	Labels     map[string]string
}

// runnable is the layers as one image named tag that runs c.Entrypoint as
// c.User from /, with PeerPATH, the OCI title, version and created labels
// (c.Labels added) and no history: reproducible from its inputs.
func runnable(tag name.Tag, c runConfig, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = c.Arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: c.Created}
	cf.Config.User = c.User
	cf.Config.Entrypoint = nil
	if c.Entrypoint != "" {
		cf.Config.Entrypoint = []string{c.Entrypoint}
	}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{PeerPATH}
	labels := map[string]string{
		"org.opencontainers.image.title":   tag.RepositoryStr(),
		"org.opencontainers.image.version": tag.TagStr(),
		"org.opencontainers.image.created": c.Created.Format(time.RFC3339),
	}
	for k, v := range c.Labels {
		labels[k] = v
	}
	cf.Config.Labels = labels
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

// WriteArchive writes the image as a docker-archive tar (manifest.json
// names it in RepoTags) through a temporary file renamed into place.
func WriteArchive(img v1.Image, tag name.Tag, output string) error {
	f, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".tmp.")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := tarball.MultiRefWrite(map[name.Reference]v1.Image{tag: img}, f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", output, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}
