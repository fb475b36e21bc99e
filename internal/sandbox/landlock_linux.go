package sandbox

import (
	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/launch"
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
type Rule = launch.Rule

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

// landlockRuleset is the ruleset a worker runs under: every filesystem right the ABI knows is
// handled, so anything not granted is denied. With ABI 6 it also stops signals and abstract
// unix sockets reaching processes outside the worker.
func landlockRuleset(abi int, rules []Rule) *launch.Landlock {
	ll := &launch.Landlock{Handled: handledAccess(abi), FileAccess: llFile, Rules: rules}
	if abi >= 6 {
		ll.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	return ll
}

// systemRules are the folders every worker may read and execute: programs, libraries and the
// system's configuration, the few devices programs expect, and /proc and /sys read-only (other
// processes' secrets there are guarded by ptrace checks, which Landlock and a non-dumpable
// runtime close).
func systemRules() []Rule {
	var rules []Rule
	for _, dir := range []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
		"/run/systemd/resolve", "/nix/store"} {
		rules = append(rules, Rule{Path: dir, Access: llExec})
	}
	for _, dir := range []string{"/proc", "/sys"} {
		rules = append(rules, Rule{Path: dir, Access: llRead})
	}
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		rules = append(rules, Rule{Path: dev, Access: unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE})
	}
	return rules
}
