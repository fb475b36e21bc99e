package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// recorder makes parts that note their starts and stops in one log.
type recorder struct{ log []string }

func (r *recorder) part(name string, failStart, failStop bool, built bool) Part {
	p := Part{Name: name, Stop: func() error {
		r.log = append(r.log, "stop "+name)
		if failStop {
			return errors.New(name + " would not stop")
		}
		return nil
	}}
	if !built {
		p.Start = func() error {
			r.log = append(r.log, "start "+name)
			if failStart {
				return errors.New(name + " would not start")
			}
			return nil
		}
	}
	return p
}

func TestList(t *testing.T) {
	tests := []struct {
		name      string
		failStart string // the part whose Start fails
		failStop  string // the part whose Stop fails
		built     string // the part built running (no Start)
		start     bool   // whether the list is started at all
		want      []string
		startErr  string
		stopErr   string
	}{
		{name: "in order, stopped in reverse", start: true,
			want: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}},
		{name: "a failed start stops only what started", start: true, failStart: "b", startErr: "b would not start",
			want: []string{"start a", "start b", "stop a"}},
		{name: "a failed stop stops the rest", start: true, failStop: "b", stopErr: "stopping b: b would not stop",
			want: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}},
		{name: "a built part stops in its place", start: true, built: "b",
			want: []string{"start a", "start c", "stop c", "stop b", "stop a"}},
		{name: "a built part stops though the list never started", built: "b",
			want: []string{"stop b"}},
		{name: "never started, nothing stops", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			var parts []Part
			for _, n := range []string{"a", "b", "c"} {
				parts = append(parts, r.part(n, tt.failStart == n, tt.failStop == n, tt.built == n))
			}
			l := New(parts...)
			if tt.start {
				err := l.Start()
				if (err == nil) != (tt.startErr == "") || (err != nil && err.Error() != tt.startErr) {
					t.Fatalf("Start = %v, want %q", err, tt.startErr)
				}
			}
			err := l.Stop()
			if (err == nil) != (tt.stopErr == "") || (err != nil && err.Error() != tt.stopErr) {
				t.Fatalf("Stop = %v, want %q", err, tt.stopErr)
			}
			if err := l.Stop(); err != nil {
				t.Fatalf("second Stop = %v", err)
			}
			if !slices.Equal(r.log, tt.want) {
				t.Fatalf("log = %v, want %v", r.log, tt.want)
			}
			if err := l.Start(); !errors.Is(err, ErrStopped) {
				t.Fatalf("Start after Stop = %v, want %v", err, ErrStopped)
			}
			if !slices.Equal(r.log, tt.want) {
				t.Fatalf("Start after Stop ran parts: %v", strings.Join(r.log, ", "))
			}
		})
	}
}

// TestListRetriesAfterFailure checks that a Start after a failed one starts the parts from
// the one that failed, not those already running.
func TestListRetriesAfterFailure(t *testing.T) {
	var starts atomic.Int32
	fail := true
	l := New(
		Part{Name: "a", Start: func() error { starts.Add(1); return nil }},
		Part{Name: "b", Start: func() error {
			if fail {
				return errors.New("not yet")
			}
			return nil
		}},
	)
	if err := l.Start(); err == nil {
		t.Fatal("Start succeeded")
	}
	fail = false
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	if n := starts.Load(); n != 1 {
		t.Fatalf("a started %d times, want 1", n)
	}
}

func TestLoop(t *testing.T) {
	var l Loop
	if err := l.Stop(); err != nil { // none running
		t.Fatal(err)
	}
	var ended atomic.Int32
	for range 3 {
		l.Go(func(ctx context.Context) {
			<-ctx.Done()
			ended.Add(1)
		})
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	// Each Go stopped the one before; Stop waited for the last.
	if n := ended.Load(); n != 3 {
		t.Fatalf("%d loops ended, want 3", n)
	}
}
