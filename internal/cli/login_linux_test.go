package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestLoginPromptsWithoutEcho runs login without --key on a terminal (a pseudo-terminal the
// test holds): it asks for the key on stderr, turns the terminal's echo off before the key is
// typed, so the key never shows, and turns it back on when it exits.
func TestLoginPromptsWithoutEcho(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := newUser(t)
	master, slave := openPTY(t)

	var mu sync.Mutex
	var shown strings.Builder // what the terminal displays
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	displayed := func() string {
		mu.Lock()
		defer mu.Unlock()
		return shown.String()
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	cmd := testkit.ReexecCommand(ctx, u.env, "runtime", "login", "--url", rt.URL, "--profile", "typed")
	cmd.Stdin = slave
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	echo := func() bool {
		tios, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tios.Lflag&unix.ECHO != 0
	}
	waitFor(t, "login to turn the terminal's echo off", func() bool { return !echo() })
	if _, err := master.WriteString(rootKey + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("login: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), `saved as profile "typed"`) || !strings.HasPrefix(errOut.String(), "API key for "+rt.URL+" (not shown): ") {
		t.Errorf("login printed %q and %q", out.String(), errOut.String())
	}
	if !echo() {
		t.Error("login left the terminal's echo off")
	}
	// With echo back on, a line typed now shows: the key, typed before it, did not.
	if _, err := master.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the terminal to show the line typed after login", func() bool { return strings.Contains(displayed(), "after") })
	if strings.Contains(displayed(), rootKey) {
		t.Errorf("the terminal showed the key: %q", displayed())
	}
	u.ok("workers", "list", "--profile", "typed")
}

// openPTY opens a pseudo-terminal pair, closed when the test ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// waitFor waits until ok, failing the test after a generous deadline (a safety net).
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
