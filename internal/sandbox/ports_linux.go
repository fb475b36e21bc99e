package sandbox

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/launch"
)

// A worker of the host's network listens on the port the runtime picked for it, which any
// process of the host may bind first (or beside it, with SO_REUSEPORT): a connection to the
// port then reaches that process, not the worker. So the runtime takes a port as the worker's
// only once every socket listening on it is the worker's. The kernel tells, with each socket
// sock_diag lists, the cgroup the process that made it was in: a socket made in the worker's
// own v2 cgroup, which the launcher was cloned into and every descendant joins, is the worker's.
// This needs no right over the worker's processes. Where the kernel does not tell (before Linux
// 5.7, no cgroup v2), or names another cgroup, a socket is the worker's when one of the
// worker's processes holds it, from their /proc/<pid>/fd: reading those of another user's (or
// a non-dumpable) process needs CAP_SYS_PTRACE, which containers often lack.

// CheckListener reports whether the worker listens on the loopback TCP port: once every
// socket listening on it (IPv4 or IPv6, any address) is the worker's, it returns them (for
// StillListens); none while none listens, and a *PortTakenError when another process made or
// holds one. It fails when it cannot tell.
func (p *Process) CheckListener(port int) ([]uint64, error) {
	found, err := listeningSockets(port)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	var held map[uint64]bool
	var heldErr error
	for _, l := range found {
		if p.cgroup != 0 && l.cgroup == p.cgroup {
			continue
		}
		if held == nil && heldErr == nil {
			held, heldErr = socketsOf(p.processes())
		}
		switch {
		case heldErr == nil && held[l.inode]:
		case heldErr == nil || p.cgroup != 0 && l.cgroup != 0:
			// No process of the worker holds it; or the runtime may not look, but it was made
			// in another cgroup than the worker's.
			return nil, &PortTakenError{Port: port, Owner: socketOwner(l)}
		default:
			return nil, heldErr
		}
	}
	inodes := make([]uint64, len(found))
	for i, l := range found {
		inodes[i] = l.inode
	}
	return inodes, nil
}

// StillListens checks, after a new connection to a worker's port, that the sockets listening
// there are still the worker's: a worker that closed its listener, or exited before the runtime
// heard of it, leaves the port to whoever binds it next. known are the listeners it was seen
// with (CheckListener); a socket not among them, which the worker may have opened since (on
// another address of the port), is looked up then, and the listeners are returned with it.
func (p *Process) StillListens(port int, known []uint64) ([]uint64, error) {
	found, err := listeningSockets(port)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("nothing listens on port %d any more", port)
	}
	for _, l := range found {
		if !slices.Contains(known, l.inode) {
			held, err := p.CheckListener(port)
			if err == nil && len(held) == 0 {
				err = fmt.Errorf("nothing listens on port %d any more", port)
			}
			return held, err
		}
	}
	return known, nil
}

// listeningSockets returns the TCP sockets listening on port, IPv4 and IPv6, from sock_diag,
// else (a kernel without it) from /proc/net/tcp{,6}, which tell no cgroup.
func listeningSockets(port int) ([]listener, error) {
	var found []listener
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		got, err := diagListeners(family, port)
		if err != nil {
			return procListeners(port)
		}
		found = append(found, got...)
	}
	return found, nil
}

// procListeners returns the TCP sockets listening on port, from /proc/net/tcp and
// /proc/net/tcp6 (absent without IPv6).
func procListeners(port int) ([]listener, error) {
	suffix := fmt.Sprintf(":%04X", port)
	var found []listener
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing the listeners on port %d: %w", port, err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], suffix) {
				continue
			}
			inode, err := strconv.ParseUint(fields[9], 10, 64)
			uid, uerr := strconv.ParseUint(fields[7], 10, 32)
			if err == nil && uerr == nil && inode != 0 {
				found = append(found, listener{inode: inode, uid: uint32(uid)})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("listing the listeners on port %d: %w", port, err)
		}
	}
	return found, nil
}

// processes lists the launcher and the worker's processes: from the worker's cgroup, which
// every descendant of the worker joins, else from the process tree (the launcher is a
// subreaper, so a daemonised child stays below it).
func (p *Process) processes() []int {
	if pids := p.group.pids(); len(pids) > 0 {
		return append(pids, p.Pid())
	}
	return launch.Descendants(p.Pid())
}

// socketsOf returns the inodes of the sockets the processes hold. A process it may not look
// into is an error: the runtime cannot tell then whose a listener is.
func socketsOf(pids []int) (map[uint64]bool, error) {
	held := map[uint64]bool{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue // exited meanwhile
		}
		for _, e := range entries {
			inode, ok, lerr := socketInode(dir + "/" + e.Name())
			if ok {
				held[inode] = true
			}
			// The folder may be listed where its links may not be read (a non-dumpable
			// process is root's): that is no answer either.
			err = cmp.Or(err, lerr)
		}
		if err != nil {
			hint := ""
			if errors.Is(err, fs.ErrPermission) {
				hint = " (give the runtime CAP_SYS_PTRACE, or its workers a cgroup v2 of their own)"
			}
			return nil, fmt.Errorf("reading the descriptors of the worker's process %d, to check whose listener is on its port%s: %w", pid, hint, err)
		}
	}
	return held, nil
}

// socketInode returns the inode of the socket a /proc/<pid>/fd/<n> link points at: ok is false
// for a descriptor that is no socket or was closed meanwhile, and err set when the link may
// not be read.
func socketInode(link string) (inode uint64, ok bool, err error) {
	target, err := os.Readlink(link)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if !strings.HasPrefix(target, "socket:[") || !strings.HasSuffix(target, "]") {
		return 0, false, nil
	}
	inode, err = strconv.ParseUint(target[len("socket:["):len(target)-1], 10, 64)
	return inode, err == nil, nil
}

// socketOwner names the process that holds the listener, for the log: "pid 123 (name)", else
// (none the runtime may look into does) the socket's user, "a process of uid 0".
func socketOwner(l listener) string {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if inode, ok, _ := socketInode(dir + "/" + fd.Name()); ok && inode == l.inode {
				comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
				return fmt.Sprintf("pid %s (%s)", e.Name(), strings.TrimSpace(string(comm)))
			}
		}
	}
	return fmt.Sprintf("a process of uid %d", l.uid)
}
