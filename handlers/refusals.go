package handlers

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/keystore"
)

// maxTalliedAddresses bounds the client addresses a minute of refused sign-ins counts apart;
// refusals from further addresses count together under otherAddress, so memory and audit
// writes stay bounded whatever the number of addresses a client can send from.
const maxTalliedAddresses = 1000

// otherAddress is the audit entry's address of the refusals past maxTalliedAddresses.
const otherAddress = "other"

// refusalTally counts refused sign-ins per client address and minute, and audits each address
// and minute once, with the count, when the minute is over (or the API shuts down): anyone can
// send wrong keys, and each one costing an audit write would let them flood the trail. The
// answer is not delayed; rate limiting is left to a gateway in front.
type refusalTally struct {
	audit func(keystore.AuditEntry, int) // writes one entry, with the count in its details
	now   func() time.Time

	mu      sync.Mutex
	minutes []*refusalMinute // oldest first
	timer   *time.Timer      // set while a minute waits for its end
	stopped bool             // the API shut down: what comes is written at once
}

// refusalMinute is one minute's count of refused sign-ins by address.
type refusalMinute struct {
	start  time.Time
	counts map[string]*refusalCount
	order  []*refusalCount // in order of first refusal
}

// refusalCount is the refused sign-ins of one address in one minute; the first one's time and
// request id go on the audit entry.
type refusalCount struct {
	addr      string
	first     time.Time
	requestID string
	n         int
}

func newRefusalTally(audit func(keystore.AuditEntry, int)) *refusalTally {
	return &refusalTally{audit: audit, now: time.Now}
}

// add counts a refused sign-in of r.
func (t *refusalTally) add(r *http.Request) {
	now := t.now()
	t.mu.Lock()
	m := t.minute(now)
	addr := trace.ClientAddr(r)
	c := m.counts[addr]
	if c == nil && len(m.counts) >= maxTalliedAddresses {
		addr = otherAddress
		c = m.counts[addr]
	}
	if c == nil {
		c = &refusalCount{addr: addr, first: now, requestID: trace.RequestID(r.Context())}
		m.counts[addr] = c
		m.order = append(m.order, c)
	}
	c.n++
	if t.timer == nil && !t.stopped {
		t.timer = time.AfterFunc(t.minutes[0].start.Add(time.Minute).Sub(now), t.flushEnded)
	}
	stopped := t.stopped
	t.mu.Unlock()
	if stopped {
		t.write(t.take(true))
	}
}

// minute returns the minute of now, opened if needed; t.mu is held.
func (t *refusalTally) minute(now time.Time) *refusalMinute {
	start := now.Truncate(time.Minute)
	if n := len(t.minutes); n > 0 && t.minutes[n-1].start.Equal(start) {
		return t.minutes[n-1]
	}
	m := &refusalMinute{start: start, counts: map[string]*refusalCount{}}
	t.minutes = append(t.minutes, m)
	return m
}

// flushEnded writes the minutes that are over and waits for the end of the next one, if any.
func (t *refusalTally) flushEnded() {
	ended := t.take(false)
	t.mu.Lock()
	t.timer = nil
	if len(t.minutes) > 0 && !t.stopped {
		t.timer = time.AfterFunc(t.minutes[0].start.Add(time.Minute).Sub(t.now()), t.flushEnded)
	}
	t.mu.Unlock()
	t.write(ended)
}

// take removes and returns the minutes that are over, or all of them.
func (t *refusalTally) take(all bool) []*refusalMinute {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	i := 0
	for i < len(t.minutes) && (all || !now.Before(t.minutes[i].start.Add(time.Minute))) {
		i++
	}
	taken := t.minutes[:i:i]
	t.minutes = t.minutes[i:]
	return taken
}

func (t *refusalTally) write(minutes []*refusalMinute) {
	for _, m := range minutes {
		for _, c := range m.order {
			t.audit(keystore.AuditEntry{Time: c.first, Action: "session.login", Outcome: "denied", RequestID: c.requestID, RemoteAddr: c.addr}, c.n)
		}
	}
}

// stop writes every count now, the minute under way included; later refusals are written as
// they come.
func (t *refusalTally) stop() {
	t.mu.Lock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.mu.Unlock()
	t.write(t.take(true))
}

// auditRefusals is the refusalTally's writer: one audit line and entry per address and minute.
func (a *pipeline) auditRefusals(e keystore.AuditEntry, n int) {
	a.record(context.Background(), e, nil, zap.Int("count", n))
}
