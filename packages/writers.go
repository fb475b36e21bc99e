package packages

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// Creating a file costs the file system far more than reading it out of the archive, and an
// archive's files are independent of one another once their folders exist. So while the
// extractor reads a .tgz, the files of new names in folders it made go to fileWriters, which
// create them on a few goroutines at once. Anything that could make two entries meet (a name
// seen before, a folder where a file was, a link) first waits for every write handed out and
// then goes on one entry at a time, as an extraction into a folder that was not empty does.
const (
	// maxBuffered is the largest file handed to the writers whole; a larger one is written as
	// it is read. With writerQueue, it bounds the memory an extraction holds.
	maxBuffered = 256 << 10
	writerQueue = 16
	// maxOpenDirs bounds the folders kept open for the writers.
	maxOpenDirs = 256
)

// fileWriters create files handed to them on a few goroutines, or, inline, on the extractor's
// own: a paced extraction (StageOptions.Pace) writes one file at a time, its writes counted
// as its work, yet still one call to the file system per file into a folder kept open, with
// its body read into a reused buffer, instead of walking the path and checking it for links
// at every file (most of a paced install's CPU besides the file system's own work).
type fileWriters struct {
	inline  bool
	jobs    chan fileJob
	pending sync.WaitGroup // jobs handed out and not done
	running sync.WaitGroup // the goroutines

	written atomic.Int64 // files created

	mu  sync.Mutex
	err error // the first failure
}

// fileJob is one file to create: name (for messages) in dir, with its whole body.
type fileJob struct {
	dir  *os.Root
	name string
	perm fs.FileMode
	body *bytes.Buffer
}

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writerCount is how many goroutines create the files of an extraction that is not paced.
func writerCount() int { return min(max(runtime.GOMAXPROCS(0), 2), 4) }

// startWriters starts the n writers of x; with n 0, x writes inline.
func (x *extractor) startWriters(n int) {
	w := &fileWriters{jobs: make(chan fileJob, writerQueue), inline: n == 0}
	w.running.Add(n)
	for range n {
		go w.run()
	}
	x.w, x.dirs, x.files, x.made = w, map[string]*os.Root{}, map[string]bool{}, map[string]bool{}
}

func (w *fileWriters) run() {
	defer w.running.Done()
	for j := range w.jobs {
		if w.failure() != nil {
			recycle(j.body)
		} else if err := w.write(j); err != nil {
			w.fail(err)
		}
		w.pending.Done()
	}
}

// write creates j's file, counts it, and gives its buffer back.
func (w *fileWriters) write(j fileJob) error {
	err := writeWhole(j)
	recycle(j.body)
	if err != nil {
		return err
	}
	w.written.Add(1)
	return nil
}

// recycle gives a file's buffer back to the pool, unless it grew too large to keep.
func recycle(body *bytes.Buffer) {
	if body.Cap() <= 2*maxBuffered {
		buffers.Put(body)
	}
}

func writeWhole(j fileJob) error {
	f, err := create(j.dir, j.name, j.perm)
	if err != nil {
		return err
	}
	_, err = j.body.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return corrupt(err)
	}
	return nil
}

func (w *fileWriters) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// failure returns the first failure of a write, or nil.
func (w *fileWriters) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// wait waits for the writes handed out and returns the first failure.
func (w *fileWriters) wait() error {
	w.pending.Wait()
	return w.failure()
}

// create creates the file name, new, in its folder dir: one call to the file system.
func create(dir *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	f, err := dir.OpenFile(path.Base(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, writeErr(name, err)
	}
	return f, nil
}

// fold is the key of a name in the extractor's sets: a file system may not tell case apart.
func fold(name string) string { return strings.ToLower(name) }

// folder returns the folder dir made by this extraction, making it if needed, open for the
// writers; ok is false when dir would meet a file of the archive (the caller goes on one entry
// at a time, which reports it).
func (x *extractor) folder(dir string) (root *os.Root, ok bool, err error) {
	if dir == "." {
		return x.dest, true, nil
	}
	if root, ok := x.dirs[dir]; ok {
		return root, true, nil
	}
	for p := dir; p != "."; p = path.Dir(p) {
		if x.files[fold(p)] {
			return nil, false, nil
		}
	}
	if len(x.dirs) >= maxOpenDirs {
		if err := x.w.wait(); err != nil {
			return nil, false, err
		}
		x.closeDirs()
	}
	if err := x.dest.MkdirAll(dir, 0o755); err != nil {
		return nil, false, writeErr(dir, err)
	}
	if root, err = x.dest.OpenRoot(dir); err != nil {
		return nil, false, writeErr(dir, err)
	}
	x.dirs[dir] = root
	for p := dir; p != "." && !x.made[fold(p)]; p = path.Dir(p) {
		x.made[fold(p)] = true
	}
	return root, true, nil
}

func (x *extractor) closeDirs() {
	for dir, root := range x.dirs {
		root.Close()
		delete(x.dirs, dir)
	}
}

// fast writes a file of a new name into dir, a folder this extraction made: a small one is
// read whole and handed to the writers, a larger one written here while they go on. The
// limits are checked on the bytes read, before anything is written.
func (x *extractor) fast(dir *os.Root, name string, perm fs.FileMode, declared int64, r io.Reader) error {
	remaining := x.limits.Unpacked - x.stats.Bytes
	if x.limits.Unpacked > 0 && declared > remaining {
		return x.tooBig()
	}
	src := r
	if x.limits.Unpacked > 0 {
		src = io.LimitReader(r, remaining+1)
	}
	x.files[fold(name)] = true
	if declared > maxBuffered {
		f, err := create(dir, name, perm)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, src)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return x.wrote(n, err)
	}
	body := buffers.Get().(*bytes.Buffer)
	body.Reset()
	body.Grow(int(max(declared, 0)))
	n, err := body.ReadFrom(src)
	if err := x.wrote(n, err); err != nil {
		recycle(body)
		return err
	}
	j := fileJob{dir: dir, name: name, perm: perm, body: body}
	if x.w.inline {
		return x.w.write(j)
	}
	x.w.pending.Add(1)
	x.w.jobs <- j
	return nil
}

// wrote counts a file of n bytes, or reports the limit or err.
func (x *extractor) wrote(n int64, err error) error {
	x.stats.Bytes += n
	x.stats.Files++
	switch {
	case x.limits.Unpacked > 0 && x.stats.Bytes > x.limits.Unpacked:
		return x.tooBig()
	case err != nil:
		return corrupt(err)
	}
	return nil
}

// sequential ends the parallel writing: it waits for the writes handed out and returns their
// failure; the entries after go one at a time.
func (x *extractor) sequential() error {
	return x.finish(nil)
}

// finish stops the writers, if any, once every write handed out has ended, and closes their
// folders. It returns err, or else the writers' failure.
func (x *extractor) finish(err error) error {
	if x.w == nil {
		return err
	}
	close(x.w.jobs)
	x.w.running.Wait()
	x.closeDirs()
	if err == nil {
		err = x.w.failure()
	}
	x.w = nil
	return err
}
