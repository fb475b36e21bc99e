package sandbox

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access rights of Landlock rules, by what a folder is for.
const (
	llRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llExec  = llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE
	llWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// llFile are the rights that apply to a single file rule.
	llFile = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE
)

// Rule gives access to a path and everything beneath it.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// landlockABI returns the kernel's Landlock ABI version, 0 when Landlock is unavailable.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// handledAccess is every filesystem right the ABI knows, so anything not granted is denied.
func handledAccess(abi int) uint64 {
	access := uint64(llExec | llWrite | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)
	if abi >= 2 {
		access |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		access |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return access
}

// restrictThread confines the calling OS thread, and every process it starts from now on, to
// the rules. With ABI 6 it also stops signals and abstract unix sockets reaching processes
// outside the worker. The caller must hold the thread (runtime.LockOSThread) and have set
// no_new_privs.
func restrictThread(abi int, rules []Rule) error {
	handled := handledAccess(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	size := unsafe.Sizeof(attr.Access_fs)
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock ruleset: %v", errno)
	}
	defer unix.Close(int(fd))
	for _, r := range rules {
		if err := addRule(int(fd), r, handled); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict: %v", errno)
	}
	return nil
}

func addRule(ruleset int, r Rule, handled uint64) error {
	f, err := os.OpenFile(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // a system folder this machine lacks
		}
		return fmt.Errorf("landlock rule for %s: %v", r.Path, err)
	}
	defer f.Close()
	access := r.Access & handled
	if fi, err := f.Stat(); err == nil && !fi.IsDir() {
		access &= llFile
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(f.Fd())}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock rule for %s: %v", r.Path, errno)
	}
	return nil
}

// systemRules are the folders every worker may read and execute: programs, libraries and the
// system's configuration, the few devices programs expect, and /proc and /sys read-only (other
// processes' secrets there are guarded by ptrace checks, which Landlock and a non-dumpable
// runtime close).
func systemRules() []Rule {
	var rules []Rule
	for _, dir := range []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
		"/run/systemd/resolve", "/nix/store"} {
		rules = append(rules, Rule{dir, llExec})
	}
	for _, dir := range []string{"/proc", "/sys"} {
		rules = append(rules, Rule{dir, llRead})
	}
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		rules = append(rules, Rule{dev, unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE})
	}
	return rules
}
