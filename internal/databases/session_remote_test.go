package databases

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestSessionPrimary: in primary mode a session forwards its pipelines to its worker's
// namespace with the primary's token, on one stream: the baton sqld answers goes with the
// next call and never to the guest (a baton the guest sends is dropped), Close ends the
// stream, and past the limit the statements are refused, told and recorded.
func TestSessionPrimary(t *testing.T) {
	var mu sync.Mutex
	var bodies, hosts, auths []string
	used := int64(0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Equal(b, sizeQuery):
			_, _ = io.WriteString(w, sizeAnswer(used))
		case r.URL.Path == "/v2/pipeline":
			bodies, hosts, auths = append(bodies, string(b)), append(hosts, r.Host), append(auths, r.Header.Get("Authorization"))
			_, _ = io.WriteString(w, `{"baton":"b`+strconv.Itoa(len(bodies))+`","base_url":"http://elsewhere","results":[{"type":"ok","response":{"type":"execute","result":{"cols":[],"rows":[],"affected_row_count":0,"last_insert_rowid":null}}}]}`)
		default:
			_, _ = io.WriteString(w, `{}`) // the namespace's creation
		}
	}))
	defer srv.Close()
	r, err := NewRemote(srv.URL, "primary-secret", srv.URL, "admin-secret")
	if err != nil {
		t.Fatal(err)
	}
	m := New(t.TempDir(), r)
	full := 0
	s, err := m.Session(context.Background(), "@team/app", 1<<20, func() { full++ })
	if err != nil {
		t.Fatal(err)
	}
	call := func(body string) map[string]any {
		t.Helper()
		var out map[string]any
		if err := json.Unmarshal(s.Execute(context.Background(), []byte(body)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := call(`{"baton":"someone-elses","requests":[{"type":"execute","stmt":{"sql":"select 1"}}]}`)
	if first["baton"] != nil || first["base_url"] != nil || first["results"] == nil {
		t.Errorf("the guest's answer = %v, want the results without the stream's baton", first)
	}
	call(`{"requests":[{"type":"execute","stmt":{"sql":"select 2"}}]}`)
	s.Close()
	mu.Lock()
	if len(bodies) != 3 {
		t.Fatalf("the primary got %d pipelines, want 3: %q", len(bodies), bodies)
	}
	for i, want := range []string{`"baton":null`, `"baton":"b1"`, `"baton":"b2"`} {
		if !strings.Contains(bodies[i], want) {
			t.Errorf("pipeline %d = %s, want %s", i, bodies[i], want)
		}
		if hosts[i] != Namespace("@team/app")+"."+r.primary.Host || auths[i] != "Bearer primary-secret" {
			t.Errorf("pipeline %d went to %s with %q", i, hosts[i], auths[i])
		}
	}
	if !strings.Contains(bodies[2], `"close"`) {
		t.Errorf("Close sent %s, want the stream closed", bodies[2])
	}

	used = 2 << 20
	mu.Unlock()
	r.gauge(Namespace("@team/app")).measured.Store(0) // measured a second ago
	s2, _ := m.Session(context.Background(), "@team/app", 1<<20, func() { full++ })
	out := string(s2.Execute(context.Background(), []byte(`{"requests":[{"type":"execute","stmt":{"sql":"insert into t values (1)"}}]}`)))
	s2.Close()
	mu.Lock()
	sent := len(bodies)
	mu.Unlock()
	if !strings.Contains(out, "limits.database") || full != 1 || sent != 3 {
		t.Errorf("past the limit the session answered %s (told %d times, %d pipelines sent)", out, full, sent)
	}
	if info := m.Info(context.Background(), "@team/app"); !strings.Contains(info.Error, "limits.database") {
		t.Errorf("Info = %+v, want the limit named", info)
	}
}
