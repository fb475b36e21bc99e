package workers

import (
	"sync"
	"time"
)

// LogLine is one line a worker process wrote.
type LogLine struct {
	Seq     uint64 // per worker, from 1, in the order lines arrived
	Time    time.Time
	Version string
	PID     int
	Stream  string // stdout or stderr
	Text    string
}

// DefaultLogLines is how many recent lines of each worker the log book keeps by default.
const DefaultLogLines = 1000

// LogBookBytes caps the text a log book keeps for one worker, whatever its line count.
const LogBookBytes = 1 << 20

// followBuffer is how many lines a follower may fall behind before lines are dropped for it.
const followBuffer = 256

// LogBook keeps the recent output lines of every worker, in a bounded ring per worker name
// (all its versions and processes), and hands new lines to followers.
type LogBook struct {
	lines, bytes int

	mu    sync.Mutex
	rings map[string]*ring
}

// NewLogBook returns a log book keeping up to lines lines (and LogBookBytes of text) per
// worker; lines <= 0 means DefaultLogLines.
func NewLogBook(lines int) *LogBook {
	if lines <= 0 {
		lines = DefaultLogLines
	}
	return &LogBook{lines: lines, bytes: LogBookBytes, rings: map[string]*ring{}}
}

// ring is one worker's lines, oldest first from head: a queue whose front is compacted away
// once it is half the slice, so appends and evictions cost O(1) amortised.
type ring struct {
	lines     []LogLine
	head      int
	bytes     int
	seq       uint64
	followers map[*Follower]struct{}
}

func (r *ring) kept() []LogLine { return r.lines[r.head:] }

// Follower receives a worker's new lines until it is closed.
type Follower struct {
	// Lines delivers the new lines; it is closed by Close.
	Lines <-chan LogLine
	lines chan LogLine

	book    *LogBook
	worker  string
	dropped int // lines it missed by falling behind, guarded by book.mu
}

// Dropped returns and resets how many lines the follower missed by falling behind.
func (f *Follower) Dropped() int {
	f.book.mu.Lock()
	defer f.book.mu.Unlock()
	n := f.dropped
	f.dropped = 0
	return n
}

// Close stops the delivery and closes Lines.
func (f *Follower) Close() {
	f.book.mu.Lock()
	defer f.book.mu.Unlock()
	r := f.book.rings[f.worker]
	if r == nil {
		return
	}
	if _, ok := r.followers[f]; ok {
		delete(r.followers, f)
		close(f.lines)
	}
}

func (b *LogBook) ring(worker string) *ring {
	r := b.rings[worker]
	if r == nil {
		r = &ring{followers: map[*Follower]struct{}{}}
		b.rings[worker] = r
	}
	return r
}

// Append adds a line of worker's output, dropping the oldest lines past the bounds, and
// hands it to the worker's followers; a follower that is behind misses it (and counts it).
func (b *LogBook) Append(worker string, l LogLine) {
	if len(l.Text) > b.bytes {
		l.Text = l.Text[:b.bytes]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ring(worker)
	r.seq++
	l.Seq = r.seq
	r.lines = append(r.lines, l)
	r.bytes += len(l.Text)
	for len(r.kept()) > b.lines || r.bytes > b.bytes {
		r.bytes -= len(r.lines[r.head].Text)
		r.lines[r.head] = LogLine{}
		r.head++
	}
	if r.head >= 64 && r.head >= len(r.lines)/2 {
		n := copy(r.lines, r.kept())
		clear(r.lines[n:])
		r.lines, r.head = r.lines[:n], 0
	}
	for f := range r.followers {
		select {
		case f.lines <- l:
		default:
			f.dropped++
		}
	}
}

// LogQuery selects lines.
type LogQuery struct {
	Since  time.Time // only lines written after it, when set
	After  uint64    // only lines with a greater Seq
	Stream string    // only this stream, when set
	Limit  int       // at most this many, the newest; 0 means all
}

func (q LogQuery) match(l *LogLine) bool {
	return l.Seq > q.After && (q.Since.IsZero() || l.Time.After(q.Since)) && (q.Stream == "" || l.Stream == q.Stream)
}

// Lines returns the worker's kept lines that q selects, oldest first.
func (b *LogBook) Lines(worker string, q LogQuery) []LogLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.linesLocked(worker, q)
}

func (b *LogBook) linesLocked(worker string, q LogQuery) []LogLine {
	r := b.rings[worker]
	if r == nil {
		return []LogLine{}
	}
	kept := r.kept()
	var out []LogLine
	for i := len(kept) - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
		if q.match(&kept[i]) {
			out = append(out, kept[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if out == nil {
		out = []LogLine{}
	}
	return out
}

// Follow returns the kept lines q selects and a follower of the worker's next lines, with
// nothing lost or repeated between the two.
func (b *LogBook) Follow(worker string, q LogQuery) ([]LogLine, *Follower) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan LogLine, followBuffer)
	f := &Follower{Lines: ch, lines: ch, book: b, worker: worker}
	b.ring(worker).followers[f] = struct{}{}
	return b.linesLocked(worker, q), f
}

// CloseFollowers ends every follower: the runtime is shutting down.
func (b *LogBook) CloseFollowers() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.rings {
		for f := range r.followers {
			delete(r.followers, f)
			close(f.lines)
		}
	}
}
