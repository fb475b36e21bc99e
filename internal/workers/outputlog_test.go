package workers

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestOutputLog: lines of in-process workers go into the log book, every one, and into the
// logger within the rate, which the versions of a worker do not share.
func TestOutputLog(t *testing.T) {
	core, logged := observer.New(zap.InfoLevel)
	book := NewLogBook(0)
	out := NewOutputLog(book, zap.New(core), 2)
	w := out.Writer("app", "1.0.0", "stderr", map[string]string{"TOKEN": "s3cr3t"})
	w.Write([]byte("one\ntwo s3cr3t\nthr"))
	w.Write([]byte("ee\nfour"))
	w.Flush()
	other := out.Writer("app", "2.0.0", "stderr", nil)
	other.Write([]byte("five\n"))
	var texts []string
	for _, l := range book.Lines("app", LogQuery{}) {
		texts = append(texts, l.Version+":"+l.Stream+":"+l.Text)
	}
	want := []string{"1.0.0:stderr:one", "1.0.0:stderr:two [secret TOKEN]", "1.0.0:stderr:three", "1.0.0:stderr:four", "2.0.0:stderr:five"}
	if len(texts) != len(want) {
		t.Fatalf("book = %q, want %q", texts, want)
	}
	for i := range want {
		if texts[i] != want[i] {
			t.Fatalf("book = %q, want %q", texts, want)
		}
	}
	// Two lines a second for 1.0.0, its own two for 2.0.0.
	var lines []string
	for _, e := range logged.All() {
		lines = append(lines, e.Message)
	}
	if len(lines) != 3 || lines[0] != "one" || lines[1] != "two [secret TOKEN]" || lines[2] != "five" {
		t.Errorf("logged = %q, want one, two, five", lines)
	}
}
