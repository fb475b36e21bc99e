package workers

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// OutputLog takes the output of workers that run in the runtime's own process (WebAssembly
// workers write their standard error here) as the pool takes a process's: each line goes into
// the log book and, within worker_log_rate lines a second per worker version, to Caddy's log.
type OutputLog struct {
	book   *LogBook
	logger *zap.Logger
	rate   int

	mu     sync.Mutex
	limits map[string]*rateLimit // by worker@version
}

// maxOutputLimits bounds the rate limits kept; past it they start afresh.
const maxOutputLimits = 4096

// NewOutputLog returns an output log writing into book and through logger, rate lines a
// second per worker version (0: DefaultLogRate).
func NewOutputLog(book *LogBook, logger *zap.Logger, rate int) *OutputLog {
	if rate <= 0 {
		rate = DefaultLogRate
	}
	return &OutputLog{book: book, logger: logger, rate: rate, limits: map[string]*rateLimit{}}
}

// Writer returns the writer of one run's stream (stdout or stderr) of a worker version, which
// replaces the values of the run's secrets (by name) in its lines; Flush it when the run ends.
// A run that writes nothing costs nothing more.
func (o *OutputLog) Writer(worker, version, stream string, secrets map[string]string) *OutputWriter {
	return &OutputWriter{log: o, secrets: secrets, l: lineLog{stream: stream, book: o.book, worker: worker, version: version}}
}

// limit returns the rate limit of a worker version, made on its first line.
func (o *OutputLog) limit(worker, version string) *rateLimit {
	key := worker + "@" + version
	o.mu.Lock()
	defer o.mu.Unlock()
	limit, ok := o.limits[key]
	if !ok {
		if len(o.limits) >= maxOutputLimits {
			o.limits = map[string]*rateLimit{}
		}
		limit = newRateLimit(o.logger.With(zap.String("worker", worker), zap.String("version", version)), o.rate)
		o.limits[key] = limit
	}
	return limit
}

// OutputWriter writes a stream a line at a time into the output log.
type OutputWriter struct {
	log     *OutputLog
	secrets map[string]string
	l       lineLog
}

// Write logs every complete line of b and keeps the rest for the next write.
func (w *OutputWriter) Write(b []byte) (int, error) {
	if w.l.limit == nil {
		w.l.limit = w.log.limit(w.l.worker, w.l.version)
		w.l.logger, w.l.pid = w.l.limit.logger, new(atomic.Int64)
		w.l.redact = redactor(w.secrets)
	}
	return w.l.Write(b)
}

// Flush logs what is left after the last newline.
func (w *OutputWriter) Flush() {
	if len(w.l.buf) > 0 {
		w.l.log(w.l.buf)
		w.l.buf = nil
	}
}
