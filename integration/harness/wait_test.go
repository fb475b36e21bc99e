package harness

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadStop(t *testing.T) {
	tests := []struct {
		name    string
		fail    bool
		minSent int64
		want    string
	}{
		{"all passed", false, 1, ""},
		{"a failure", true, 1, "first: boom"},
		{"too few sent", false, 1 << 62, "only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Hammer(t, 2, func(client, n int) error {
				if tt.fail && n == 3 {
					return errors.New("boom")
				}
				return nil
			})
			Eventually(t, "some requests", 5*time.Second, func() bool { return l.Sent() > 10 })
			err := l.Stop(tt.minSent)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Stop = %v, want %q", err, tt.want)
			}
		})
	}
}
