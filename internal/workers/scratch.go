package workers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// scratchSeq numbers the scratch folders of this runtime's processes, across its pools: a
// reload may run two at once.
var scratchSeq atomic.Int64

// scratchFolder returns a new scratch folder for a process of name@version: one path segment
// per process, so a process starting while another drains never shares its folder, naming
// the runtime's pid, so a later runtime may remove what a killed one left.
func scratchFolder(base, name, version string) string {
	return filepath.Join(base, fmt.Sprintf("%s@%s~%d-%d", strings.ReplaceAll(name, "/", "+"), version, os.Getpid(), scratchSeq.Add(1)))
}

// sweepScratch removes the scratch folders of runtimes that are gone. Only folders named as
// scratchFolder names them are touched.
func sweepScratch(base string, logger *zap.Logger) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '~')
		if i < 0 || !e.IsDir() {
			continue
		}
		pidText, seq, _ := strings.Cut(e.Name()[i+1:], "-")
		pid, err := strconv.Atoi(pidText)
		if _, serr := strconv.Atoi(seq); err != nil || serr != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
			logger.Warn("removing a scratch folder left by an earlier runtime", zap.Error(err), troubleshooting.ScratchLeftover.Field())
		}
	}
}

// processAlive reports whether a process exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer p.Release()
	err = p.Signal(syscall.Signal(0))
	return err == nil || !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH)
}

// overScratch takes a process whose scratch folder passed its limit out of the pool, as a
// stop asked for rather than a crash: the sandbox kills it next, and the next request starts
// a new process with an empty folder.
func (pr *proc) overScratch(reason error) {
	pr.logger.Warn("worker passed its scratch limit; stopping it", zap.String("reason", reason.Error()),
		zap.String("setting", "worker_scratch, or the manifest's limits.scratch"))
	pr.retireNow()
}

// retireNow takes the process out of the pool, stopping on purpose.
func (pr *proc) retireNow() {
	p := pr.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(pr)
	pr.stopping.Store(true)
	pr.retiring.Store(true)
}
