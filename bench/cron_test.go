package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// cronWindow is how long BenchmarkCronLateness watches the ticks of its trigger.
var cronWindow = flag.Duration("cron-window", time.Minute, "how long BenchmarkCronLateness watches an @every 1s trigger")

// BenchmarkCronLateness times, on one runtime process with nothing else to do, how late the
// ticks of an @every 1s cron trigger reach the worker: over cron-window (a minute), from each
// tick's scheduled second (its run's scheduledAt) until the test worker received its request
// (the worker's clock, the same machine's), through the whole path of a tick (the run's row in
// the key store, the data plane, the proxy to the process).
func BenchmarkCronLateness(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	writeProcessWorker(b, s, "ticked", "cron:\n  - { schedule: \"@every 1s\", path: /tick/bench }\n")
	var late []time.Duration
	for range b.N {
		late = append(late, cronTicks(b, s, *cronWindow)...)
	}
	if len(late) == 0 {
		b.Fatal("no tick reached the worker")
	}
	b.ReportMetric(ms(percentile(late, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(late, 0.99)), "p99-ms")
	b.ReportMetric(float64(len(late)), "ticks")
}

// cronTicks watches the ticks of the worker ticked for window and returns each one's lateness.
func cronTicks(b *testing.B, s *harness.Server, window time.Duration) []time.Duration {
	// The first tick starts the process: it is not a tick's lateness, so the window begins after it.
	harness.EventuallyNil(b, 30*time.Second, func() error {
		if ticks, err := workerTicks(s); err != nil || len(ticks) == 0 {
			return fmt.Errorf("no tick yet (%v)", err)
		}
		return nil
	})
	from := time.Now()
	time.Sleep(window)
	ticks, err := workerTicks(s)
	if err != nil {
		b.Fatal(err)
	}
	var c api.WorkerCron
	if resp := s.Get(s.API+"/workers/_/ticked/cron", harness.WithKey(rootKey)); resp.Status != http.StatusOK || resp.JSON(&c) != nil {
		b.Fatalf("GET cron = %s", resp)
	}
	scheduled := map[string]time.Time{}
	for _, r := range c.Runs {
		at, _ := time.Parse(time.RFC3339Nano, r.ScheduledAt)
		scheduled[r.RequestID] = at
	}
	var late []time.Duration
	for _, t := range ticks {
		if at, ok := scheduled[t.RequestID]; ok && at.After(from) {
			late = append(late, t.At.Sub(at))
		}
	}
	return late
}

// workerTicks lists the ticks the test worker at /ticked/ received.
func workerTicks(s *harness.Server) ([]struct {
	At        time.Time
	RequestID string
}, error) {
	resp, err := s.Send("GET", "/ticked/ticks")
	if err != nil {
		return nil, err
	}
	var ticks []struct {
		At        time.Time
		RequestID string
	}
	if resp.Status != http.StatusOK {
		return nil, fmt.Errorf("GET /ticked/ticks = %s", resp)
	}
	return ticks, json.Unmarshal(resp.Body, &ticks)
}
