package workers

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// lineLog writes a process's output, a line at a time, into the log book and, within the
// process's rate limit, through the logger; a line longer than 64 KiB is cut.
type lineLog struct {
	logger *zap.Logger
	stream string
	limit  *rateLimit
	buf    []byte

	book            *LogBook
	worker, version string
	pid             *atomic.Int64
	// redact replaces the exact values of the process's secrets; nil when it has none.
	redact *strings.Replacer
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.log(l.buf)
		l.buf = nil
	}
	return len(b), nil
}

// flush logs what is left after the last newline, and the count of dropped lines.
func (l *lineLog) flush() {
	if len(l.buf) > 0 {
		l.log(l.buf)
		l.buf = nil
	}
	l.limit.report()
}

func (l *lineLog) log(line []byte) {
	text := string(line)
	if l.redact != nil {
		text = l.redact.Replace(text)
	}
	l.book.Append(l.worker, LogLine{Time: time.Now(), Version: l.version, PID: int(l.pid.Load()), Stream: l.stream, Text: text})
	if l.limit.take() {
		l.logger.Info(text, zap.String("stream", l.stream))
	}
}

// redactor returns what replaces each value of secrets (by name) in a line with the name
// ("[secret API_TOKEN]"), or nil when there is none. Longer values come first, so a value that
// holds another is replaced whole.
func redactor(secrets map[string]string) *strings.Replacer {
	names := make([]string, 0, len(secrets))
	for name, value := range secrets {
		if value != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(secrets[b]), len(secrets[a])), strings.Compare(a, b))
	})
	pairs := make([]string, 0, 2*len(names))
	for _, name := range names {
		pairs = append(pairs, secrets[name], "[secret "+name+"]")
	}
	return strings.NewReplacer(pairs...)
}

// rateLimit is a token bucket shared by a process's output streams: rate lines a second, with
// bursts of one second's worth. Lines past it are counted, and the count is logged at most
// once a second.
type rateLimit struct {
	logger  *zap.Logger
	mu      sync.Mutex
	rate    float64
	tokens  float64
	last    time.Time
	dropped int
	pending *time.Timer // a report is scheduled
}

func newRateLimit(logger *zap.Logger, perSecond int) *rateLimit {
	return &rateLimit{logger: logger, rate: float64(perSecond), tokens: float64(perSecond), last: time.Now()}
}

func (r *rateLimit) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.tokens = min(r.rate, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	r.last = now
	if r.tokens >= 1 {
		r.tokens--
		return true
	}
	r.dropped++
	if r.pending == nil {
		r.pending = time.AfterFunc(time.Second, r.report)
	}
	return false
}

// report logs how many lines were dropped since the last report.
func (r *rateLimit) report() {
	r.mu.Lock()
	n := r.dropped
	r.dropped = 0
	if r.pending != nil {
		r.pending.Stop()
		r.pending = nil
	}
	r.mu.Unlock()
	if n > 0 {
		r.logger.Warn("worker output dropped: too many lines", zap.Int("dropped_lines", n), zap.Float64("worker_log_rate", r.rate))
	}
}
