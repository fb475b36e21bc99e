package harness

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// minSentWait bounds how long Stop waits for the requests it wants sent.
const minSentWait = 10 * time.Second

// Load is a set of clients sending requests in a loop until Stop.
type Load struct {
	stop         chan struct{}
	stopOnce     sync.Once
	wg           sync.WaitGroup
	sent, failed atomic.Int64
	first        atomic.Value
}

// Hammer starts clients goroutines, each calling request(client, n) for its n-th request until
// Stop (at the latest when tb ends); a non-nil error counts as a failed request.
func Hammer(tb testing.TB, clients int, request func(client, n int) error) *Load {
	l := &Load{stop: make(chan struct{})}
	tb.Cleanup(l.halt)
	for i := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				err := request(i, n)
				l.sent.Add(1)
				if err != nil {
					l.failed.Add(1)
					l.first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	return l
}

// Stop ends the load, once at least minSent requests were sent (waiting up to minSentWait for
// them: a loaded machine sends fewer in the same time), and waits for the clients; it returns
// an error naming the first failure when any request failed, or when fewer than minSent were
// sent.
func (l *Load) Stop(minSent int64) error {
	for deadline := time.Now().Add(minSentWait); l.sent.Load() < minSent && l.failed.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	l.halt()
	if n := l.failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d requests failed; first: %v", n, l.sent.Load(), l.first.Load())
	}
	if n := l.sent.Load(); n < minSent {
		return fmt.Errorf("only %d requests were sent, want at least %d", n, minSent)
	}
	return nil
}

func (l *Load) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// Sent is how many requests were sent.
func (l *Load) Sent() int64 { return l.sent.Load() }
