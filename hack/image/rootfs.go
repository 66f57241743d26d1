package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// capabilityXattr is the extended attribute that carries a file's
// capabilities (setcap); it travels in the layer as a PAX record, which
// containerd applies on unpack.
const capabilityXattr = "security.capability"

// RootfsOptions say what goes into a root file system image: a directory
// made by the caller (Debian's packages unpacked, binaries copied in),
// packed as one layer, and the image config.
type RootfsOptions struct {
	// Root is the directory that becomes the image's /.
	Root string
	// Name is the image's name, REGISTRY/REPOSITORY:TAG, fully qualified.
	Name string
	// Entrypoint is the absolute path of the command the image runs; it
	// must be an executable file (or a symlink to one) inside Root. Empty
	// for an image of files only (a kernel for KubeVirt's kernel boot,
	// which runs a binary of its own in it).
	Entrypoint string
	// User is the image config's User: a numeric "UID" or "UID:GID"; root
	// (0) is allowed (virt-handler's image runs as root).
	User string
	// Arch is the image's architecture (amd64, arm64, s390x).
	Arch string
	// Created is the time of every file and of the image.
	Created time.Time
	// Labels are added to the image config.
	Labels map[string]string
}

func rootfsMain(args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ContinueOnError)
	var labels multiFlag
	root := fs.String("root", "", "the directory that becomes the image's / (owned as it will be in the image: run as root)")
	imageName := fs.String("name", "", "the image's name, REGISTRY/REPOSITORY:TAG, fully qualified")
	entrypoint := fs.String("entrypoint", "", "absolute path, inside the root, of the command the image runs (none: an image of files only)")
	user := fs.String("user", "", "the user the image runs as: UID or UID:GID, numeric (0 allowed)")
	arch := fs.String("arch", runtime.GOARCH, "the image's architecture: amd64, arm64 or s390x")
	fs.Var(&labels, "label", "KEY=VALUE added to the image config's labels (repeat)")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every file and of the image (default $SOURCE_DATE_EPOCH, else 0)")
	output := fs.String("output", "", "output tar file (docker-archive, for `ctr images import`)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *root == "" || *imageName == "" || *user == "" || *output == "" {
		return usageError("rootfs: -root, -name, -user and -output are required")
	}
	o := RootfsOptions{Root: *root, Name: *imageName, Entrypoint: *entrypoint, User: *user, Arch: *arch, Labels: map[string]string{}}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return usageError(fmt.Sprintf("rootfs: -label %q: want KEY=VALUE", l))
		}
		o.Labels[k] = v
	}
	created, err := parseEpoch(*epoch)
	if err != nil {
		return usageError("rootfs: " + err.Error())
	}
	o.Created = created
	if _, err := o.check(); err != nil {
		return err
	}
	layerFile, err := os.CreateTemp(filepath.Dir(*output), "."+filepath.Base(*output)+".layer.")
	if err != nil {
		return err
	}
	defer os.Remove(layerFile.Name())
	stats, err := WriteRootfsLayer(o.Root, o.Created, layerFile)
	if cerr := layerFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	img, tag, err := Rootfs(o, layerFile.Name())
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
	fmt.Printf("wrote %s: %s (linux/%s, user %s, entrypoint %s, %s, image id %s)\n",
		*output, tag, o.Arch, o.User, o.Entrypoint, stats, cn)
	return nil
}

// RootfsStats counts what went into a layer.
type RootfsStats struct {
	Files, Dirs, Symlinks, Hardlinks, Capabilities int
	// Skipped are device nodes, sockets and FIFOs under /dev and /run
	// (the runtime provides those directories).
	Skipped int
	// Bytes is the size of the regular files' contents.
	Bytes int64
}

func (s RootfsStats) String() string {
	return fmt.Sprintf("%d files (%.1f MiB), %d directories, %d symlinks, %d hard links, %d with capabilities",
		s.Files, float64(s.Bytes)/(1<<20), s.Dirs, s.Symlinks, s.Hardlinks, s.Capabilities)
}

// WriteRootfsLayer writes the directory root as a gzipped tar layer to w:
// entries in lexical order, every time set to created, numeric ownership
// and modes as on disk, hard links as links to the first name, and each
// regular file's security.capability attribute as a PAX xattr record.
// Device nodes, sockets and FIFOs are refused, except under /dev and /run,
// whose contents are skipped (the runtime mounts its own).
func WriteRootfsLayer(root string, created time.Time, w io.Writer) (RootfsStats, error) {
	var st RootfsStats
	info, err := os.Lstat(root)
	if err != nil {
		return st, fmt.Errorf("root: %w", err)
	}
	if !info.IsDir() {
		return st, fmt.Errorf("root %s is not a directory", root)
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	links := map[[2]uint64]string{}
	walk := func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no ownership information", p)
		}
		h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: created, Uid: int(sys.Uid), Gid: int(sys.Gid), Format: tar.FormatPAX}
		if fi.Mode()&fs.ModeSetuid != 0 {
			h.Mode |= 0o4000
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			h.Mode |= 0o2000
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		var data *os.File
		switch t := fi.Mode().Type(); {
		case t == fs.ModeDir:
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			st.Dirs++
		case t == fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			st.Symlinks++
		case t == 0:
			key := [2]uint64{sys.Dev, sys.Ino}
			if first, seen := links[key]; seen && sys.Nlink > 1 {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				st.Hardlinks++
				break
			}
			links[key] = name
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
			caps, err := getxattr(p, capabilityXattr)
			if err != nil {
				return fmt.Errorf("%s: reading %s: %w", p, capabilityXattr, err)
			}
			if caps != nil {
				h.PAXRecords = map[string]string{"SCHILY.xattr." + capabilityXattr: string(caps)}
				st.Capabilities++
			}
			if data, err = os.Open(p); err != nil {
				return err
			}
			defer data.Close()
			st.Files++
			st.Bytes += fi.Size()
		default:
			top, _, _ := strings.Cut(name, "/")
			if top == "dev" || top == "run" {
				st.Skipped++
				return nil
			}
			return fmt.Errorf("%s: a %s outside /dev and /run: a root file system image holds files, directories and links", p, t)
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if data != nil {
			n, err := io.Copy(tw, data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if n != h.Size {
				return fmt.Errorf("%s: changed while it was read (%d bytes, then %d)", p, h.Size, n)
			}
		}
		return nil
	}
	// WalkDir visits in lexical order: the same tree gives the same layer.
	if err := filepath.WalkDir(root, walk); err != nil {
		return st, err
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, zw.Close()
}

// getxattr returns the attribute's value, or nil when the file has none.
func getxattr(p, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := syscall.Getxattr(p, attr, buf)
		switch {
		case errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP):
			return nil, nil
		case errors.Is(err, syscall.ERANGE):
			buf = make([]byte, 2*len(buf))
			continue
		case err != nil:
			return nil, err
		}
		return buf[:n], nil
	}
}

// Rootfs makes the image from a gzipped layer file written by
// WriteRootfsLayer, after checking that the entrypoint is an executable
// inside the root.
func Rootfs(o RootfsOptions, layerPath string) (v1.Image, name.Tag, error) {
	var none name.Tag
	tag, err := o.check()
	if err != nil {
		return nil, none, err
	}
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return nil, none, err
	}
	img, err := runnable(tag, runConfig{Arch: o.Arch, Created: o.Created, User: o.User, Entrypoint: o.Entrypoint, Labels: o.Labels}, layer)
	if err != nil {
		return nil, none, err
	}
	return img, tag, nil
}

// check validates the options before anything is written, and returns the
// image's name.
func (o RootfsOptions) check() (name.Tag, error) {
	var none name.Tag
	tag, err := ParseImageName(o.Name)
	if err != nil {
		return none, err
	}
	if numericUser.FindStringSubmatch(o.User) == nil {
		return none, fmt.Errorf("user %q: want a numeric UID or UID:GID", o.User)
	}
	if _, ok := elfMachine[o.Arch]; !ok {
		return none, fmt.Errorf("architecture %s is not supported (want one of amd64, arm64, s390x)", o.Arch)
	}
	if fi, err := os.Stat(o.Root); err != nil {
		return none, fmt.Errorf("root: %w", err)
	} else if !fi.IsDir() {
		return none, fmt.Errorf("root %s is not a directory", o.Root)
	}
	if o.Entrypoint == "" {
		return tag, nil
	}
	if !path.IsAbs(o.Entrypoint) || path.Clean(o.Entrypoint) != o.Entrypoint || o.Entrypoint == "/" {
		return none, fmt.Errorf("entrypoint %q: want a clean absolute path", o.Entrypoint)
	}
	if err := checkExecutableIn(o.Root, o.Entrypoint); err != nil {
		return none, err
	}
	return tag, nil
}

// checkExecutableIn checks that p, inside root, is an executable regular
// file; a symlink as its last component is followed as the image would
// follow it (absolute targets inside root).
func checkExecutableIn(root, p string) error {
	cur := p
	for hops := 0; hops < 40; hops++ {
		full := filepath.Join(root, filepath.FromSlash(cur))
		fi, err := os.Lstat(full)
		if err != nil {
			return fmt.Errorf("entrypoint %s: not in the root %s: %w", p, root, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(full)
			if err != nil {
				return err
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(cur), target)
			}
			cur = path.Clean(target)
			continue
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("entrypoint %s: %s is not an executable file (mode %s)", p, cur, fi.Mode())
		}
		return nil
	}
	return fmt.Errorf("entrypoint %s: too many symlinks", p)
}
