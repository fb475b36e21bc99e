package packages

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watcher tells a catalog when its folders change on disk, so that a listing can be answered
// from memory until they do. It watches every folder a listing reads: the catalog folders
// (or, for one that does not exist yet, its nearest existing parent), scope folders, unit
// folders and version folders; a folder's watch also reports changes to the files in it, such
// as an edited manifest. Where notifications are unavailable (no watcher, or a folder that
// cannot be watched) listings check the disk each time, as before.
type watcher struct {
	fs      *fsnotify.Watcher
	changed func() // called on every event and error: something may have changed

	mu      sync.Mutex
	watched map[string]bool
	closed  bool
}

// newWatcher starts a watcher calling changed, or returns nil where the platform gives none.
func newWatcher(changed func()) *watcher {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	wt := &watcher{fs: w, changed: changed, watched: map[string]bool{}}
	go wt.run()
	return wt
}

func (w *watcher) run() {
	for {
		select {
		case _, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.changed()
		case _, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			// An overflow loses events: whatever was cached may be stale.
			w.changed()
		}
	}
}

// watch makes the watched folders exactly dirs, and reports whether they were all watched
// already: a listing that needed a new watch may have missed a change made before the watch
// began, so it must not be kept. A folder that cannot be watched reports false too.
func (w *watcher) watch(dirs []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	complete := true
	want := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		want[d] = true
		if w.watched[d] {
			continue
		}
		complete = false
		if err := w.fs.Add(d); err == nil {
			w.watched[d] = true
		}
	}
	for d := range w.watched {
		if !want[d] {
			_ = w.fs.Remove(d) // fails for a folder already gone, whose watch went with it
			delete(w.watched, d)
		}
	}
	return complete
}

func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.fs.Close()
	}
}

// existingAncestor is dir, or its nearest parent that exists: where dir would appear.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
