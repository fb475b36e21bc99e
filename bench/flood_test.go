package bench

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// floodRate is the lines a second the noisy worker writes.
const floodRate = 100_000

// BenchmarkFlood measures what a worker flooding its output costs another: a quiet process
// worker's throughput while a second worker writes floodRate lines a second (each one read,
// kept in the log ring and offered to Caddy's log), against the quiet worker with the noisy
// one stopped. The two alternate round by round.
func BenchmarkFlood(b *testing.B) {
	s := harness.Start(b, harness.Config{Global: accessLog, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	writeProcessWorker(b, s, "quiet", "")
	writeProcessWorker(b, s, "noisy", "env:\n  FLOOD_RATE: \"100000\"\n")
	client, conns := newClient()
	defer client.CloseIdleConnections()
	quiet, err := newRequest(s.URL+"/quiet/sleep?d=0", nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := load(client, quiet, conns, warmUp); err != nil {
		b.Fatalf("warming up: %v", err)
	}
	toggle := func(verb string) {
		if resp := s.Do("POST", s.API+"/workers/_/noisy/1.0.0/"+verb, harness.WithKey(rootKey)); resp.Status != 200 {
			b.Fatalf("%s noisy: %s", verb, resp)
		}
	}
	// written is the number of the noisy worker's last line the runtime has taken in.
	written := func() uint64 {
		resp := s.Get(s.API+"/workers/_/noisy/logs?limit=1", harness.WithKey(rootKey))
		var body struct{ Lines []struct{ Seq uint64 } }
		if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &body) != nil {
			b.Fatalf("noisy logs = %s", resp)
		}
		if len(body.Lines) == 0 {
			return 0
		}
		return body.Lines[0].Seq
	}
	for range *rounds {
		toggle("disable")
		b.Run("quiet", func(b *testing.B) { benchGet(b, client, quiet) })
		toggle("enable")
		fetch(b, client, mustRequest(b, s.URL+"/noisy/sleep?d=0"))
		from := written()
		harness.Eventually(b, "the noisy worker to flood", 10*time.Second, func() bool { return written() > from+floodRate/100 })
		b.Run("flooded", func(b *testing.B) {
			from, start := written(), time.Now()
			benchGet(b, client, quiet)
			b.ReportMetric(float64(written()-from)/time.Since(start).Seconds(), "lines/s")
		})
	}
}

func mustRequest(b *testing.B, url string) *http.Request {
	req, err := newRequest(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}
