package databases

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// primary is a stand-in sqld on loopback: it records what reaches it and answers a size
// query with the namespace size given.
type primary struct {
	mu       sync.Mutex
	got      []*http.Request
	measured []bool // got[i] was a size query
	used     int64
}

func (p *primary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	size := bytes.Equal(body, sizeQuery)
	p.mu.Lock()
	p.got, p.measured = append(p.got, r.Clone(context.Background())), append(p.measured, size)
	used := p.used
	p.mu.Unlock()
	if size {
		_, _ = io.WriteString(w, sizeAnswer(used))
		return
	}
	_, _ = io.WriteString(w, `{"results":[]}`)
}

// sizeAnswer is sqld's answer to sizeQuery for a namespace of used bytes.
func sizeAnswer(used int64) string {
	return `{"baton":null,"base_url":null,"results":[{"type":"ok","response":{"type":"execute","result":{"cols":[{"name":"size"}],` +
		`"rows":[[{"type":"integer","value":"` + strconv.FormatInt(used, 10) + `"}]],"affected_row_count":0,"last_insert_rowid":null}}},` +
		`{"type":"ok","response":{"type":"close"}}]}`
}

// sent is the last request that reached the primary but the size queries.
func (p *primary) sent() *http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last *http.Request
	for i, g := range p.got {
		if !p.measured[i] {
			last = g
		}
	}
	return last
}

// TestEndpoint: the endpoint of one process takes its token alone, forwards Hrana's routes
// alone, to its namespace alone whatever host the worker names, with the primary's token
// instead of the worker's, and refuses statements while the namespace is past its limit.
func TestEndpoint(t *testing.T) {
	p := &primary{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	r, err := NewRemote(srv.URL, "primary-secret", srv.URL, "admin-secret")
	if err != nil {
		t.Fatal(err)
	}
	ns := Namespace("app")
	var overs []error
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := r.endpoint(ns, 1000, func(err error) { overs = append(overs, err) })(ln)
	var token, base string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, TokenVar+"="); ok {
			token = v
		}
		if v, ok := strings.CutPrefix(kv, URLVar+"="); ok {
			base, _, _ = strings.Cut(v, "?")
		}
	}
	if len(token) != 64 || base != "http://"+ln.Addr().String() {
		t.Fatalf("variables %q: want a 256-bit token and the listener's URL", env)
	}

	tests := []struct {
		name, method, path, auth, host string
		status                         int
		forwarded                      bool
	}{
		{"no token", "POST", "/v2/pipeline", "", "", 401, false},
		{"another token", "POST", "/v2/pipeline", "Bearer " + strings.Repeat("0", 64), "", 401, false},
		{"the primary's token", "POST", "/v2/pipeline", "Bearer primary-secret", "", 401, false},
		{"a pipeline", "POST", "/v2/pipeline", "Bearer " + token, "", 200, true},
		{"another namespace by host", "POST", "/v3/pipeline", "Bearer " + token, "w-other.localhost", 200, true},
		{"the token in the query", "POST", "/v2/pipeline?authToken=" + token, "", "", 200, true},
		{"a version probe", "GET", "/v2", "Bearer " + token, "", 200, true},
		{"a dump", "GET", "/dump", "Bearer " + token, "", 404, false},
		{"the admin API", "POST", "/v1/namespaces/x/create", "Bearer " + token, "", 404, false},
		{"a pipeline by GET", "GET", "/v2/pipeline", "Bearer " + token, "", 404, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.sent()
			req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(`{"requests":[]}`))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			sent := p.sent()
			if !tt.forwarded {
				if sent != before {
					t.Errorf("refused, but %s %s reached the primary", sent.Method, sent.URL)
				}
				return
			}
			if sent == nil || sent == before {
				t.Fatal("nothing reached the primary")
			}
			if want := ns + "." + strings.TrimPrefix(srv.URL, "http://"); sent.Host != want {
				t.Errorf("the primary got host %q, want %q", sent.Host, want)
			}
			if sent.Header.Get("Authorization") != "Bearer primary-secret" || sent.URL.RawQuery != "" {
				t.Errorf("the primary got Authorization %q and query %q: want its own token alone",
					sent.Header.Get("Authorization"), sent.URL.RawQuery)
			}
		})
	}

	p.mu.Lock()
	p.used = 5000
	p.mu.Unlock()
	r2 := r.handler(ns, token, 1000, func(err error) { overs = append(overs, err) })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v2/pipeline", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+token)
	r2.ServeHTTP(rec, req)
	if rec.Code != http.StatusInsufficientStorage || !strings.Contains(rec.Body.String(), "limits.database") || len(overs) != 1 {
		t.Errorf("past its limit: %d %s, %d reports; want 507 naming limits.database, reported once", rec.Code, rec.Body, len(overs))
	}
}

// TestNamespace: a worker's namespace is a DNS label of its own, the same on every call.
func TestNamespace(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$`)
	seen := map[string]string{}
	for _, w := range []string{"app", "App", "@team/app", "@team+app", "a"} {
		ns := Namespace(w)
		if !label.MatchString(ns) || ns != Namespace(w) {
			t.Errorf("Namespace(%q) = %q: want a stable DNS label", w, ns)
		}
		if other, ok := seen[ns]; ok {
			t.Errorf("%q and %q share namespace %s", w, other, ns)
		}
		seen[ns] = w
	}
}

// TestNewRemoteNeedsAdmin: without the admin API's address the error names the setting.
func TestNewRemoteNeedsAdmin(t *testing.T) {
	_, err := NewRemote("http://localhost:8080", "", "", "")
	if err == nil || !strings.Contains(err.Error(), "admin_url") {
		t.Errorf("NewRemote without admin_url = %v", err)
	}
	m := Refusing(err)
	if _, aerr := m.Attach(context.Background(), "app", 0, nil); !errors.Is(aerr, err) {
		t.Errorf("Attach of a refusing manager = %v, want %v", aerr, err)
	}
}
