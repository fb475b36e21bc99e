package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// scratchCheckEvery is how often the watcher measures a scratch folder the kernel does not
// bound: a worker can write past its limit for up to this long.
const scratchCheckEvery = time.Second

// minCharge is what each file, folder or link in a scratch folder counts at least, one block
// as most file systems take: many empty files cost space too, and one measurement visits at
// most limit/minCharge entries. The tmpfs allows as many inodes.
const minCharge = 4096

// maxScratchDepth bounds how deep the watcher descends; a deeper tree cannot be measured, and
// its worker is stopped.
const maxScratchDepth = 256

// fileID names a file across its hard links.
type fileID struct{ dev, ino uint64 }

// scratchUsage returns the space the entries below dir take: allocated blocks (a sparse file
// counts what it holds, not its length), each entry at least minCharge, the data of a file
// with several links once. It stops counting once past limit.
func scratchUsage(dir string, limit int64) (int64, error) {
	m := measure{limit: limit, seen: map[fileID]bool{}}
	err := m.folder(dir, 0)
	return m.used, err
}

type measure struct {
	limit, used int64
	seen        map[fileID]bool
}

// folder charges the entries of one folder, then visits its subfolders, so one folder is
// open at a time however deep the tree.
func (m *measure) folder(dir string, depth int) error {
	if depth > maxScratchDepth {
		return fmt.Errorf("folders nested deeper than %d levels", maxScratchDepth)
	}
	subs, err := m.entries(dir)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if m.used > m.limit {
			return nil
		}
		if err := m.folder(sub, depth+1); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// entries charges the entries of dir, a batch at a time, and returns its subfolders.
func (m *measure) entries(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var subs []string
	for m.used <= m.limit {
		batch, err := f.ReadDir(256)
		for _, e := range batch {
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since it was listed
			}
			if err != nil {
				return nil, err
			}
			m.charge(info)
			if info.IsDir() {
				subs = append(subs, filepath.Join(dir, e.Name()))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return subs, nil
}

func (m *measure) charge(info fs.FileInfo) {
	size, id, linked := allocated(info)
	if linked {
		if m.seen[id] {
			size = 0 // its data is counted already; the name costs minCharge
		}
		m.seen[id] = true
	}
	m.used += max(size, minCharge)
}

// Usage returns the space the entries below dir take, counted as the scratch watcher counts
// it (allocated blocks, each entry at least one block, hard links once), stopping once past
// limit.
func Usage(dir string, limit int64) (int64, error) { return scratchUsage(dir, limit) }

// watchScratch measures dir, the worker's folder named what ("scratch folder"), every
// scratchCheckEvery and, once it takes more than limit bytes or cannot be measured, calls over
// with the reason and stops watching. The returned stop ends the watch and waits until over,
// if called, has returned.
func watchScratch(dir, what string, limit int64, over func(reason error)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(scratchCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			used, err := scratchUsage(dir, limit)
			switch {
			case err != nil:
				over(fmt.Errorf("its %s cannot be measured: %w", what, err))
			case used > limit:
				over(fmt.Errorf("its %s holds more than its limit of %s", what, humanize.IBytes(uint64(limit))))
			default:
				continue
			}
			return
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// watch starts the watcher of the worker's scratch folder when no tmpfs bounds it: past the
// limit, spec.OverScratch hears why and kill stops the worker.
func watch(spec Spec, limit int64, kill func()) (stop func()) {
	return watchFolder(spec.Scratch, "scratch folder", limit, spec.OverScratch, kill)
}

// watchData starts the watcher of the worker's data folder (Spec.Data), which only a watcher
// can bound: past Limits.Database, spec.OverData hears why and kill stops the worker.
func watchData(spec Spec, limit int64, kill func()) (stop func()) {
	return watchFolder(spec.Data, "database folder", limit, spec.OverData, kill)
}

// watchFolder watches dir by limit, telling over (if set) and calling kill past it.
func watchFolder(dir, what string, limit int64, over func(error), kill func()) (stop func()) {
	if limit <= 0 || dir == "" {
		return func() {}
	}
	return watchScratch(dir, what, limit, func(reason error) {
		if over != nil {
			over(reason)
		}
		kill()
	})
}

// both returns a stop that runs a and b.
func both(a, b func()) func() { return func() { a(); b() } }

// removeScratch removes a scratch folder once its worker has exited, so its space is given
// back at once.
func removeScratch(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
