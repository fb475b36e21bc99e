package serving

import (
	"context"
	"net/http/httptest"
	"testing"
)

func TestPrepareCronHeader(t *testing.T) {
	s := New(Options{})
	for _, c := range []struct {
		name    string
		trigger string // "" a client's request
		want    []string
	}{
		{"a client's header is removed", "", nil},
		{"a tick's request names its trigger", "nightly", []string{"nightly"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/w/tasks", nil)
			if c.trigger != "" {
				r = r.WithContext(WithCron(context.Background(), c.trigger))
			}
			r.Header.Set("Runtime-Cron", "forged")
			r.Header["Runtime_Cron"] = []string{"forged"}
			r.Header["runtime-cron"] = []string{"forged"}
			s.Prepare(r)
			var got []string
			for name, lines := range r.Header {
				if sameHeader(name, CronHeader) {
					got = append(got, lines...)
				}
			}
			if len(got) != len(c.want) || len(got) == 1 && got[0] != c.want[0] {
				t.Fatalf("cron header lines %q, want %q", got, c.want)
			}
		})
	}
}
