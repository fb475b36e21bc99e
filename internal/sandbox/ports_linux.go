package sandbox

import (
	"bufio"
	"fmt"
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
// only once every socket listening on it is held by the worker's processes, the launcher and
// its descendants (the launcher is a subreaper, so a daemonised child stays among them).

// CheckListener reports whether the worker listens on the loopback TCP port: once every
// socket listening on it (IPv4 or IPv6, any address) is held by the worker's processes, it
// returns them (for StillListens); none while none listens, and a *PortTakenError when
// another process holds one.
func (p *Process) CheckListener(port int) ([]uint64, error) {
	inodes, err := listeningSockets(port)
	if err != nil || len(inodes) == 0 {
		return nil, err
	}
	held, err := socketsOf(p.processes())
	if err != nil {
		return nil, err
	}
	for _, inode := range inodes {
		if !held[inode] {
			return nil, &PortTakenError{Port: port, Owner: socketOwner(inode)}
		}
	}
	return inodes, nil
}

// StillListens checks, after a new connection to a worker's port, that the sockets listening
// there are still the worker's: a worker that closed its listener, or exited before the runtime
// heard of it, leaves the port to whoever binds it next. known are the listeners it was seen
// with (CheckListener); a socket not among them, which the worker may have opened since (on
// another address of the port), is looked up then, and the listeners are returned with it.
func (p *Process) StillListens(port int, known []uint64) ([]uint64, error) {
	inodes, err := listeningSockets(port)
	if err != nil {
		return nil, err
	}
	if len(inodes) == 0 {
		return nil, fmt.Errorf("nothing listens on port %d any more", port)
	}
	for _, inode := range inodes {
		if !slices.Contains(known, inode) {
			held, err := p.CheckListener(port)
			if err == nil && len(held) == 0 {
				err = fmt.Errorf("nothing listens on port %d any more", port)
			}
			return held, err
		}
	}
	return known, nil
}

// listeningSockets returns the inodes of the TCP sockets listening on port, IPv4 and IPv6, from
// sock_diag, else (a kernel without it) from /proc/net/tcp{,6}.
func listeningSockets(port int) ([]uint64, error) {
	var inodes []uint64
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		got, err := diagListeners(family, port)
		if err != nil {
			return procListeners(port)
		}
		inodes = append(inodes, got...)
	}
	return inodes, nil
}

// procListeners returns the inodes of the TCP sockets listening on port, from /proc/net/tcp
// and /proc/net/tcp6 (absent without IPv6).
func procListeners(port int) ([]uint64, error) {
	suffix := fmt.Sprintf(":%04X", port)
	var inodes []uint64
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
			if inode, err := strconv.ParseUint(fields[9], 10, 64); err == nil && inode != 0 {
				inodes = append(inodes, inode)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("listing the listeners on port %d: %w", port, err)
		}
	}
	return inodes, nil
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
		if err != nil {
			return nil, fmt.Errorf("reading the descriptors of the worker's process %d, to check whose listener is on its port: %w", pid, err)
		}
		for _, e := range entries {
			if inode, ok := socketInode(dir + "/" + e.Name()); ok {
				held[inode] = true
			}
		}
	}
	return held, nil
}

// socketInode returns the inode of the socket a /proc/<pid>/fd/<n> link points at.
func socketInode(link string) (uint64, bool) {
	target, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(target, "socket:[") || !strings.HasSuffix(target, "]") {
		return 0, false
	}
	inode, err := strconv.ParseUint(target[len("socket:["):len(target)-1], 10, 64)
	return inode, err == nil
}

// socketOwner names the process that holds the socket inode, for the log: "pid 123 (name)",
// or "" when none the runtime may look into does.
func socketOwner(inode uint64) string {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if held, ok := socketInode(dir + "/" + fd.Name()); ok && held == inode {
				comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
				return fmt.Sprintf("pid %s (%s)", e.Name(), strings.TrimSpace(string(comm)))
			}
		}
	}
	return ""
}
