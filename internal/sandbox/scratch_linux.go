package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/launch"
)

// tmpfsOptions are the mount options of a worker's scratch tmpfs, which its stage mounts in
// the launcher's mount namespace: the kernel holds the size, and the tmpfs goes with the
// namespace when the worker's last process exits. Its pages are charged to the memory cgroup
// of the process that writes them, the worker's, so they count against its memory limit.
func tmpfsOptions(size int64, uid, gid uint32) string {
	return fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", size, max(size/minCharge, 16), uid, gid)
}

// probeTmpfs reports why launchers cannot mount a tmpfs in a mount namespace of their own, or
// nil when they can: it tries on a thread of its own, which the Go runtime ends afterwards
// (the goroutine exits without unlocking it), so nothing else ever runs in that namespace.
func probeTmpfs() error {
	if os.Geteuid() != 0 {
		return errors.New("the runtime does not run as root")
	}
	dir, err := os.MkdirTemp("", "runtime-scratch-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			res <- fmt.Errorf("a mount namespace: %w", err)
			return
		}
		res <- launch.MountTmpfs(dir, tmpfsOptions(1<<20, 0, 0))
	}()
	return <-res
}
