package workers

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func texts(lines []LogLine) string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return strings.Join(out, ",")
}

func TestLogBookBoundsAndQueries(t *testing.T) {
	b := NewLogBook(5)
	start := time.Now()
	for i := range 12 {
		stream := "stdout"
		if i%3 == 0 {
			stream = "stderr"
		}
		b.Append("app", LogLine{Time: start.Add(time.Duration(i) * time.Second), Version: "1.0.0", PID: 7, Stream: stream, Text: fmt.Sprint(i)})
	}
	b.Append("other", LogLine{Time: start, Stream: "stdout", Text: "x"})
	tests := []struct {
		name string
		q    LogQuery
		want string
	}{
		{"the newest five", LogQuery{}, "7,8,9,10,11"},
		{"limit keeps the newest", LogQuery{Limit: 2}, "10,11"},
		{"stream", LogQuery{Stream: "stderr"}, "9"},
		{"since a time", LogQuery{Since: start.Add(9 * time.Second)}, "10,11"},
		{"after a sequence number", LogQuery{After: 10}, "10,11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := texts(b.Lines("app", tt.q)); got != tt.want {
				t.Fatalf("Lines = %s, want %s", got, tt.want)
			}
		})
	}
	if got := b.Lines("app", LogQuery{}); got[0].Seq != 8 || got[4].Seq != 12 || got[0].PID != 7 || got[0].Version != "1.0.0" {
		t.Fatalf("lines = %+v", got)
	}
	if got := texts(b.Lines("other", LogQuery{})); got != "x" {
		t.Fatalf("another worker's lines = %s", got)
	}
	if got := b.Lines("none", LogQuery{}); got == nil || len(got) != 0 {
		t.Fatalf("a worker with no output = %#v", got)
	}
}

func TestLogBookByteBound(t *testing.T) {
	b := NewLogBook(1 << 20)
	line := strings.Repeat("x", 1000)
	for range 5000 { // 5 MB through a 1 MiB book
		b.Append("flood", LogLine{Text: line})
	}
	b.mu.Lock()
	r := b.rings["flood"]
	kept, bytes, capacity := len(r.kept()), r.bytes, cap(r.lines)
	b.mu.Unlock()
	if bytes > LogBookBytes || kept != LogBookBytes/1000 || capacity > 4*kept {
		t.Fatalf("kept %d lines, %d bytes, capacity %d", kept, bytes, capacity)
	}
	b.Append("huge", LogLine{Text: strings.Repeat("y", 2*LogBookBytes)})
	if got := b.Lines("huge", LogQuery{}); len(got) != 1 || len(got[0].Text) != LogBookBytes {
		t.Fatalf("a line over the byte bound is kept as %d bytes", len(got[0].Text))
	}
}

func TestLogBookFollow(t *testing.T) {
	b := NewLogBook(100)
	b.Append("app", LogLine{Text: "old"})
	backlog, f := b.Follow("app", LogQuery{})
	if texts(backlog) != "old" {
		t.Fatalf("backlog = %s", texts(backlog))
	}
	b.Append("app", LogLine{Text: "new"})
	b.Append("other", LogLine{Text: "not mine"})
	if l := <-f.Lines; l.Text != "new" || l.Seq != 2 {
		t.Fatalf("followed %+v", l)
	}
	// A follower that falls behind misses lines, and is told how many.
	for i := range followBuffer + 10 {
		b.Append("app", LogLine{Text: fmt.Sprint(i)})
	}
	if n := f.Dropped(); n != 10 {
		t.Fatalf("dropped = %d, want 10", n)
	}
	for range followBuffer {
		<-f.Lines
	}
	f.Close()
	f.Close()
	if _, ok := <-f.Lines; ok {
		t.Fatal("a closed follower still delivers")
	}
	_, g := b.Follow("app", LogQuery{})
	b.CloseFollowers()
	if _, ok := <-g.Lines; ok {
		t.Fatal("CloseFollowers left a follower open")
	}
	g.Close()
}
