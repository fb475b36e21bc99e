package testkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "three calls", time.Second, func() bool { n++; return n == 3 })

	r := &recorder{TB: t}
	Eventually(r, "a thing that never happens", 50*time.Millisecond, func() bool { return false })
	if !strings.Contains(r.failed, "waiting for a thing that never happens") {
		t.Errorf("Eventually failed with %q", r.failed)
	}
}

func TestEventuallyNilSaysTheLastError(t *testing.T) {
	n := 0
	EventuallyNil(t, time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})

	r := &recorder{TB: t}
	n = 0
	EventuallyNil(r, 50*time.Millisecond, func() error { n++; return fmt.Errorf("attempt %d failed", n) })
	if want := fmt.Sprintf("attempt %d failed", n); !strings.Contains(r.failed, want) {
		t.Errorf("EventuallyNil failed with %q, want the last error %q", r.failed, want)
	}
}
