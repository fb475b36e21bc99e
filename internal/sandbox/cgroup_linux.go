package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups holds, per controller, the folder under which each worker gets its own cgroup. A
// cgroup v2 hierarchy serves every controller it has delegated (and stops a worker at once
// through cgroup.kill); on hybrid hosts the v1 hierarchies serve the controllers v2 lacks.
type cgroups struct {
	v2    string            // parent folder in the v2 hierarchy, "" without one
	bases map[string]string // controller (memory, pids, cpu) → parent folder
	mode  string            // "cgroup v2", "cgroup v1", "cgroup v2 + v1" or ""
}

var controllers = []string{"memory", "pids", "cpu"}

// newCgroups creates the runtime's parent cgroups, one per hierarchy it may write to. Where it
// may not, the worker limits fall back to rlimits.
func newCgroups(name string) *cgroups {
	cg := &cgroups{bases: map[string]string{}}
	own, mounts := ownCgroups(), cgroupMounts()
	if path, ok := own[""]; ok && mounts["cgroup2"] != "" {
		base := filepath.Join(mounts["cgroup2"], path)
		removeStale(base)
		dir := filepath.Join(base, name)
		if os.Mkdir(dir, 0o755) == nil || exists(dir) {
			cg.v2 = dir
			for _, c := range enableControllers(base, dir) {
				cg.bases[c] = dir
			}
		}
	}
	for _, c := range controllers {
		if cg.bases[c] != "" {
			continue
		}
		path, ok := own[c]
		mount := mounts[c]
		if !ok || mount == "" {
			continue
		}
		removeStale(filepath.Join(mount, path))
		dir := filepath.Join(mount, path, name)
		if os.Mkdir(dir, 0o755) == nil || exists(dir) {
			cg.bases[c] = dir
		}
	}
	cg.mode = cg.describe()
	return cg
}

// missing lists the controllers no cgroup holds.
func (cg *cgroups) missing() []string {
	var out []string
	for _, c := range controllers {
		if cg.bases[c] == "" {
			out = append(out, c)
		}
	}
	return out
}

// enableControllers makes the memory, pids and cpu controllers of the runtime's v2 cgroup
// (base) available in dir, and returns those it could. A cgroup that holds processes cannot
// hand controllers down, so when the runtime sits in a delegated cgroup of its own (systemd's
// Delegate=yes) it first moves itself into a leaf beside dir.
func enableControllers(base, dir string) []string {
	var avail []string
	for _, c := range strings.Fields(readTrim(filepath.Join(base, "cgroup.controllers"))) {
		if slices.Contains(controllers, c) {
			avail = append(avail, c)
		}
	}
	if len(avail) == 0 {
		return nil
	}
	enable := func(c string) bool {
		return writeFile(filepath.Join(base, "cgroup.subtree_control"), "+"+c) == nil &&
			writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c) == nil
	}
	if !enable(avail[0]) {
		leaf := filepath.Join(base, "runtime")
		if os.Mkdir(leaf, 0o755) != nil && !exists(leaf) ||
			writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())) != nil {
			return nil
		}
	}
	var on []string
	for _, c := range avail {
		if enable(c) {
			on = append(on, c)
		}
	}
	return on
}

// describe names the cgroup layers for the start-up log, e.g. "cgroup v2 (kill, memory) + v1
// (pids, cpu)"; "" without any.
func (cg *cgroups) describe() string {
	var v2, v1 []string
	for _, c := range controllers {
		switch base := cg.bases[c]; {
		case base == "":
		case base == cg.v2:
			v2 = append(v2, c)
		default:
			v1 = append(v1, c)
		}
	}
	var parts []string
	if cg.v2 != "" {
		parts = append(parts, "cgroup v2 ("+strings.Join(append([]string{"kill"}, v2...), ", ")+")")
	}
	if len(v1) > 0 {
		parts = append(parts, "cgroup v1 ("+strings.Join(v1, ", ")+")")
	}
	return strings.Join(parts, " + ")
}

// parentPrefix starts the name of a runtime's parent cgroup; the runtime's pid follows.
const parentPrefix = "runtime-workers-"

// removeStale stops the workers left in the cgroups of runtimes that are gone (killed before
// they could clean up) and removes those cgroups.
func removeStale(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), parentPrefix)
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || !e.IsDir() || err != nil || pid == os.Getpid() || syscallAlive(pid) {
			continue
		}
		parent := filepath.Join(base, e.Name())
		leaves, _ := os.ReadDir(parent)
		for _, leaf := range leaves {
			if leaf.IsDir() {
				g := &group{dirs: []string{filepath.Join(parent, leaf.Name())}, procs: filepath.Join(parent, leaf.Name(), "cgroup.procs")}
				if exists(filepath.Join(parent, leaf.Name(), "cgroup.kill")) {
					g.kill = filepath.Join(parent, leaf.Name(), "cgroup.kill")
				}
				g.stop()
				g.remove()
			}
		}
		_ = os.Remove(parent)
	}
}

// ownCgroups maps each controller of /proc/self/cgroup ("" for v2) to the runtime's cgroup path.
func ownCgroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// cgroupMounts maps "cgroup2" and each v1 controller to its mount point, when its mount shows
// the hierarchy's root (so a cgroup path joins onto it).
func cgroupMounts() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 || fields[3] != "/" {
			continue
		}
		switch after[0] {
		case "cgroup2":
			out["cgroup2"] = fields[4]
		case "cgroup":
			for _, opt := range strings.Split(after[2], ",") {
				if slices.Contains(controllers, opt) {
					out[opt] = fields[4]
				}
			}
		}
	}
	return out
}

// group is one worker's cgroups.
type group struct {
	dirs  []string // every leaf folder, to remove
	v2    string   // the v2 leaf, "" without one
	v1    []string // the v1 leaves
	kill  string   // the v2 cgroup.kill file, "" without v2
	procs string   // a cgroup.procs file that lists every process of the worker
}

// create makes the worker's cgroups and writes its limits; limits the cgroups cannot hold are
// returned to be set as rlimits.
func (cg *cgroups) create(id string, l Limits) (*group, Limits, error) {
	g := &group{}
	left := l
	mk := func(base string) (string, error) {
		dir := filepath.Join(base, id)
		if slices.Contains(g.dirs, dir) {
			return dir, nil
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return "", err
		}
		g.dirs = append(g.dirs, dir)
		return dir, nil
	}
	if cg.v2 != "" {
		dir, err := mk(cg.v2)
		if err != nil {
			return nil, l, err
		}
		g.v2 = dir
		if exists(filepath.Join(dir, "cgroup.kill")) {
			g.kill = filepath.Join(dir, "cgroup.kill")
		}
		g.procs = filepath.Join(dir, "cgroup.procs")
	}
	for _, c := range controllers {
		base := cg.bases[c]
		if base == "" {
			continue
		}
		dir, err := mk(base)
		if err != nil {
			g.remove()
			return nil, l, err
		}
		if g.procs == "" {
			g.procs = filepath.Join(dir, "cgroup.procs")
		}
		v2 := base == cg.v2
		if !v2 && !slices.Contains(g.v1, dir) {
			g.v1 = append(g.v1, dir)
		}
		var werr error
		switch c {
		case "memory":
			if l.Memory > 0 {
				if v2 {
					werr = writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(l.Memory, 10))
					_ = writeFile(filepath.Join(dir, "memory.swap.max"), "0")
				} else {
					werr = writeFile(filepath.Join(dir, "memory.limit_in_bytes"), strconv.FormatInt(l.Memory, 10))
					_ = writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), strconv.FormatInt(l.Memory, 10))
				}
				left.Memory = 0
			}
		case "pids":
			if l.Processes > 0 {
				werr = writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(l.Processes))
				left.Processes = 0
			}
		case "cpu":
			if l.CPU > 0 {
				const period = 100000
				quota := int64(l.CPU * period)
				if v2 {
					werr = writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
				} else {
					werr = errors.Join(writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(period)),
						writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)))
				}
				left.CPU = 0
			}
		}
		if werr != nil {
			g.remove()
			return nil, l, fmt.Errorf("cgroup %s limit: %w", c, werr)
		}
	}
	return g, left, nil
}

// stop kills every process of the worker: at once through cgroup.kill, else by signalling
// each listed process until none is left.
func (g *group) stop() {
	if g == nil {
		return
	}
	if g.kill != "" && writeFile(g.kill, "1") == nil {
		return
	}
	if g.procs == "" {
		return
	}
	for range 50 {
		pids := g.pids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = killPID(pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pids lists the worker's processes from its cgroup.procs, none without one.
func (g *group) pids() []int {
	if g == nil || g.procs == "" {
		return nil
	}
	var out []int
	for _, p := range strings.Fields(readTrim(g.procs)) {
		if pid, err := strconv.Atoi(p); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// remove deletes the worker's cgroups once their processes are gone.
func (g *group) remove() {
	if g == nil {
		return
	}
	for _, dir := range g.dirs {
		for i := 0; i < 50 && os.Remove(dir) != nil && exists(dir); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// fileidKernfs is the type of a cgroup's file handle (FILEID_KERNFS), whose 8 bytes are the
// cgroup's id.
const fileidKernfs = 0xfe

// cgroupID returns the id of the v2 cgroup dir, the one sock_diag names for the sockets made
// in it: the 8 bytes of its file handle (on 64-bit systems also the folder's inode number).
// 0 for "" or when the kernel gives none.
func cgroupID(dir string) uint64 {
	if dir == "" {
		return 0
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err != nil || h.Type() != fileidKernfs || len(h.Bytes()) != 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(h.Bytes())
}

// writeFile writes value to a cgroup file with three system calls: os.WriteFile's file would
// be registered with the runtime's poller and taken off it again (seven), and a start writes
// five limits.
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value)); err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
