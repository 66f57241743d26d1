// Package netns seals what virtop's tooling runs — the local cluster, the
// end-to-end suites, envtest's control plane — inside network namespaces it
// creates itself, whose only interface is loopback. There a dial to any
// address but loopback (a fake pod IP, a Service ClusterIP, a webhook's
// Service) fails at once with "network is unreachable": no packet can follow
// the machine's default route out, by construction rather than by care.
//
// Three pieces:
//
//   - NS, a named namespace (/run/netns/<name>, what `ip netns add` makes):
//     the local cluster's components run in it (Command), and it outlives
//     the process that made it;
//   - Forward, the one way in from the machine's own namespace: a listener
//     on the machine's loopback, handed to a forwarder process that runs
//     inside the namespace and dials the same port on the namespace's
//     loopback;
//   - Reexec and ReexecFresh, which run the current program again inside a
//     named namespace or a new anonymous one (test binaries seal themselves
//     this way, before they start anything).
//
// Creating a namespace needs root (CAP_SYS_ADMIN); ReexecFresh falls back to
// a user namespace when it is not root.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunDir is where named network namespaces are bind-mounted (iproute2's
// convention, which `ip netns` and `nsenter --net=` understand).
const RunDir = "/run/netns"

// NS is a named network namespace.
type NS struct {
	// Name is the namespace's name: its file under RunDir.
	Name string
}

// Named returns the namespace called name. It creates nothing.
func Named(name string) NS { return NS{Name: name} }

// Path is the namespace's file.
func (n NS) Path() string { return filepath.Join(RunDir, n.Name) }

// Exists reports whether the namespace's file is there and is a network
// namespace.
func (n NS) Exists() bool {
	_, err := inode(n.Path())
	return err == nil
}

// Ensure creates the namespace if it does not exist, with its loopback
// interface up and nothing else: no other interface, no route.
func (n NS) Ensure() error {
	if !n.Exists() {
		if err := run("ip", "netns", "add", n.Name); err != nil {
			if os.Geteuid() != 0 {
				return fmt.Errorf("creating network namespace %s needs root (the local cluster is sealed in it): %w", n.Name, err)
			}
			return fmt.Errorf("creating network namespace %s: %w", n.Name, err)
		}
	}
	return run("ip", "-n", n.Name, "link", "set", "lo", "up")
}

// Delete removes the namespace's name. Processes still inside keep it alive
// until they exit; nothing can enter it by name afterwards.
func (n NS) Delete() error {
	if !n.Exists() {
		return nil
	}
	return run("ip", "netns", "delete", n.Name)
}

// Inside reports whether the current process runs in the namespace.
func (n NS) Inside() bool {
	want, err := inode(n.Path())
	if err != nil {
		return false
	}
	self, err := inode("/proc/self/ns/net")
	return err == nil && self == want
}

// Holds reports whether process pid runs in the namespace.
func (n NS) Holds(pid int) bool {
	want, err := inode(n.Path())
	if err != nil {
		return false
	}
	got, err := inode(fmt.Sprintf("/proc/%d/ns/net", pid))
	return err == nil && got == want
}

// Command returns a command that runs name with args inside the namespace:
// the command itself when the current process is already inside, otherwise
// through nsenter, which enters the namespace and then executes name in its
// own place (same PID, so pidfiles and signals reach the program itself).
func (n NS) Command(name string, args ...string) *exec.Cmd {
	if n.Inside() {
		return exec.Command(name, args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "--", name}, args...)...)
}

// CommandContext is Command with a context: the process is killed when ctx
// ends before it exits.
func (n NS) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	if n.Inside() {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.Path(), "--", name}, args...)...)
}

// Sealed reports whether the current process's network namespace has no
// interface but loopback, so that no dial can leave the machine.
func Sealed() (bool, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return false, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			return false, nil
		}
	}
	return true, nil
}

// LoopbackUp sets the loopback interface of the current network namespace
// up (a new namespace starts with it down).
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading the loopback interface's flags: %w", err)
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("setting the loopback interface up: %w", err)
	}
	return nil
}

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return 0, err
	}
	// A name under RunDir that is not (or no longer) a bind mount of a
	// namespace is a plain file: not a namespace.
	if fs.Type != unix.NSFS_MAGIC && fs.Type != unix.PROC_SUPER_MAGIC {
		return 0, fmt.Errorf("%s is not a network namespace", path)
	}
	return st.Ino, nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ErrUnreachable reports whether err is the error of a dial that has no
// route: what every dial to an address but loopback returns in a sealed
// namespace.
func ErrUnreachable(err error) bool {
	return errors.Is(err, syscall.ENETUNREACH)
}

// Routes lists the destinations of the current network namespace's IPv4
// routes (the main table, /proc/net/route) and whether it has an IPv6
// default route. A namespace whose routes all lie within ranges of its
// own, with no default route, sends nothing anywhere else: a dial to any
// other address fails at once with "network is unreachable".
func Routes() (v4 []*net.IPNet, v6Default bool, err error) {
	raw, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, false, err
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil {
			return nil, false, fmt.Errorf("/proc/net/route: cannot read %q", line)
		}
		// The kernel prints them in host (little-endian) byte order.
		le := func(v uint64) net.IP { return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).To4() }
		v4 = append(v4, &net.IPNet{IP: le(dst), Mask: net.IPMask(le(mask))})
	}
	raw6, err := os.ReadFile("/proc/net/ipv6_route")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	for _, line := range strings.Split(string(raw6), "\n") {
		f := strings.Fields(line)
		// Destination ::/0 through an interface other than loopback.
		if len(f) >= 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			v6Default = true
		}
	}
	return v4, v6Default, nil
}
