package workers

import (
	"bytes"
	"os"
	"strconv"
)

// rss reads the resident memory of a process and its descendants (a sandboxed worker runs
// under its launcher) from /proc, or -1.
func rss(pid int) int64 {
	total, seen := int64(-1), map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] || len(seen) > 1000 {
			return
		}
		seen[pid] = true
		if n := vmRSS(pid); n >= 0 {
			total = max(total, 0) + n
		}
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
			for _, f := range bytes.Fields(b) {
				if child, err := strconv.Atoi(string(f)); err == nil {
					walk(child)
				}
			}
		}
	}
	walk(pid)
	return total
}

// vmRSS is one process's VmRSS in bytes, or -1.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v) // "1234 kB"
			if len(f) == 2 && string(f[1]) == "kB" {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return -1
}
