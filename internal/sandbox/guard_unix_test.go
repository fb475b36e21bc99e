//go:build unix

package sandbox

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startGroup starts a process group of two sleeping processes and returns its leader.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & sleep 60; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd
}

func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

func waitGroupGone(t *testing.T, pgid int, want bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for groupAlive(pgid) == want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGuardKillsGroupWhenPipeCloses simulates the runtime's death: the watchdog's pipe closes
// (the runtime's end goes when its process does) and the worker's whole group is killed.
func TestGuardKillsGroupWhenPipeCloses(t *testing.T) {
	cmd := startGroup(t)
	pgid := cmd.Process.Pid
	g, err := guardGroup(pgid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the watchdog is waiting on its pipe
	if !groupAlive(pgid) {
		t.Fatal("the group died before the pipe closed")
	}
	g.pipe.Close() // what the kernel does when the runtime exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the group's leader still runs after the pipe closed")
	}
	waitGroupGone(t, pgid, true)
	if groupAlive(pgid) {
		t.Fatal("a process of the group outlived the runtime")
	}
}

// TestGuardReleaseLeavesGroup checks that releasing the guard (the worker exited normally)
// stops the watchdog and kills nothing.
func TestGuardReleaseLeavesGroup(t *testing.T) {
	cmd := startGroup(t)
	g, err := guardGroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	g.release()
	time.Sleep(200 * time.Millisecond)
	if !groupAlive(cmd.Process.Pid) {
		t.Fatal("releasing the guard killed the group")
	}
}
