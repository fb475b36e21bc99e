package sandbox

import (
	"fmt"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

func setGroup(*exec.Cmd) {}

// jobs holds the job object of each running worker, by process id: terminating the job ends
// the worker with every process it started.
var jobs sync.Map

// guard puts the started worker in a job object of its own that is killed when its last
// handle closes: the runtime holds the only one, so the worker and its children end with the
// runtime however it exits. Processes the worker starts before it is assigned escape; there
// is no way to start a process suspended through os/exec.
func guard(cmd *exec.Cmd) (release func(), err error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("creating a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("setting up a job object: %w", err)
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("opening the worker process: %w", err)
	}
	defer windows.CloseHandle(proc)
	if err := windows.AssignProcessToJobObject(job, proc); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("assigning the worker to a job object: %w", err)
	}
	pid := cmd.Process.Pid
	jobs.Store(pid, job)
	return func() {
		jobs.Delete(pid)
		windows.CloseHandle(job)
	}, nil
}

// terminate kills: Windows has no SIGTERM to send to another process.
func terminate(cmd *exec.Cmd) { kill(cmd) }

// kill ends the worker and the processes it started.
func kill(cmd *exec.Cmd) {
	if job, ok := jobs.Load(cmd.Process.Pid); ok {
		_ = windows.TerminateJobObject(job.(windows.Handle), 1)
		return
	}
	_ = cmd.Process.Kill()
}
