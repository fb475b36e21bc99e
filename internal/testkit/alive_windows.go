package testkit

import "syscall"

// stillActive is the exit code Windows reports for a process that has not exited.
const stillActive = 259

// Alive reports whether the process pid exists and has not exited.
func Alive(pid int) bool {
	h, err := syscall.OpenProcess(syscall.PROCESS_QUERY_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer syscall.CloseHandle(h)
	var code uint32
	return syscall.GetExitCodeProcess(h, &code) == nil && code == stillActive
}
