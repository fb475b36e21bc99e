package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// scratchTmpfs is the tmpfs a launcher mounts on its worker's scratch folder, in a mount
// namespace of its own: the kernel holds the size, and the tmpfs goes with the namespace when
// the worker's last process exits. Its pages are charged to the memory cgroup of the process
// that writes them, the worker's, so they count against its memory limit.
type scratchTmpfs struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// mount makes the namespace's mounts private, so nothing mounted here reaches the runtime's
// namespace, and mounts the tmpfs. The launcher calls it before Landlock rules are added: a
// rule holds the folder it was opened on, which must be the tmpfs.
func (t scratchTmpfs) mount() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %v", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", t.Size, max(t.Size/minCharge, 16), t.UID, t.GID)
	if err := unix.Mount("tmpfs", t.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs on %s: %v", t.Path, err)
	}
	return nil
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
			res <- fmt.Errorf("a mount namespace: %v", err)
			return
		}
		res <- scratchTmpfs{Path: dir, Size: 1 << 20}.mount()
	}()
	return <-res
}
