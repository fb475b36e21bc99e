package sandbox

import (
	"os"
	"os/exec"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAwaitExit: awaitExit returns once the child has exited, leaving it to be reaped, and
// thirty children awaited at once hold no thread each, as waitid does.
func TestAwaitExit(t *testing.T) {
	threads := func() int {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		return len(tasks)
	}
	const children = 30
	var cmds []*exec.Cmd
	for range children {
		cmd := exec.Command("/bin/sleep", "0.5")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	before := threads()
	var wg sync.WaitGroup
	for _, cmd := range cmds {
		wg.Go(func() { awaitExit(cmd.Process.Pid) })
	}
	wg.Wait()
	if grown := threads() - before; grown >= children/2 {
		t.Errorf("awaiting %d children grew the process by %d threads", children, grown)
	}
	for _, cmd := range cmds {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil || info.Signo == 0 {
			t.Errorf("awaitExit returned before %d exited (%v)", cmd.Process.Pid, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("reaping %d: %v", cmd.Process.Pid, err)
		}
	}
}
