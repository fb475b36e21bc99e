package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing tb when it does not within timeout.
func Eventually(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	if !poll(timeout, cond) {
		tb.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// EventuallyNil polls check until it returns nil, failing tb with check's last error when it
// does not within timeout: the failure says what was wrong, not only that time ran out.
func EventuallyNil(tb testing.TB, timeout time.Duration, check func() error) {
	tb.Helper()
	var last error
	if !poll(timeout, func() bool { last = check(); return last == nil }) {
		tb.Fatalf("still after %s: %v", timeout, last)
	}
}

// poll reports whether done holds within timeout, asking every 20 ms.
func poll(timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
