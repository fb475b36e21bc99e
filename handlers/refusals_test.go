package handlers

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/keystore"
)

// TestRefusalTally checks that refused sign-ins are audited once per address and minute,
// with the count, when the minute ends, and the rest when the API stops; addresses past the
// bound count together.
func TestRefusalTally(t *testing.T) {
	var mu sync.Mutex
	var written []string
	tally := newRefusalTally(func(e keystore.AuditEntry, n int) {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, fmt.Sprintf("%s %s %s %d %s", e.Action, e.Outcome, e.RemoteAddr, n, e.Time.Format("15:04:05")))
	})
	defer tally.stop()
	now := time.Date(2026, 1, 2, 15, 4, 10, 0, time.UTC)
	tally.now = func() time.Time { return now }
	refuse := func(addr string, n int) {
		for range n {
			r := httptest.NewRequest("POST", "/api/admin/session", nil)
			r.RemoteAddr = addr + ":1234"
			tally.add(r)
		}
	}
	check := func(step string, want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(written, want) {
			t.Errorf("%s: written %q, want %q", step, written, want)
		}
		written = nil
	}

	refuse("192.0.2.1", 3)
	refuse("192.0.2.2", 1)
	now = now.Add(20 * time.Second)
	refuse("192.0.2.1", 2)
	tally.flushEnded()
	check("within the minute")

	now = now.Add(40 * time.Second) // 15:05:10: the first minute is over
	refuse("192.0.2.1", 1)
	tally.flushEnded()
	check("after the minute", "session.login denied 192.0.2.1 5 15:04:10", "session.login denied 192.0.2.2 1 15:04:10")

	for i := range maxTalliedAddresses + 5 {
		refuse(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 1)
	}
	now = now.Add(time.Minute)
	tally.flushEnded()
	mu.Lock()
	n, last := len(written), written[len(written)-1]
	written = nil
	mu.Unlock()
	// 192.0.2.1 and 999 more have entries of their own; the last 6 count together.
	if n != maxTalliedAddresses+1 || last != "session.login denied other 6 15:05:10" {
		t.Errorf("%d entries, the last %q; want %d, the last counting 6 under other", n, last, maxTalliedAddresses+1)
	}

	refuse("192.0.2.3", 2)
	tally.stop()
	check("at stop", "session.login denied 192.0.2.3 2 15:06:10")
	refuse("192.0.2.3", 1)
	check("after stop", "session.login denied 192.0.2.3 1 15:06:10")
}
