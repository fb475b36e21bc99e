package cork

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// corkState reads TCP_CORK on the connection r came on.
func corkState(t *testing.T, r *http.Request) int {
	t.Helper()
	raw := rawConn(r)
	if raw == nil {
		t.Error("no socket for the request")
		return -1
	}
	state := -1
	if err := raw.Control(func(fd uintptr) {
		var err error
		if state, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Error(err)
	}
	return state
}

// TestCorkedAnswers checks that a large answer is written with its connection corked, over
// plain TCP and through TLS, and uncorked once written, that a small one is not corked, and
// that the client gets every byte either way.
func TestCorkedAnswers(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		for _, size := range []int{100, Threshold - 1, Threshold, 17 << 10, 300 << 10} {
			body := strings.Repeat("x", size)
			var during, after int
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				Write(w, r, size, func() {
					during = corkState(t, r)
					_, _ = io.WriteString(w, body)
				})
				after = corkState(t, r)
			}))
			srv.Config.ConnContext = ConnContext
			if tlsOn {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			srv.Close()
			if err != nil || string(got) != body {
				t.Errorf("TLS %v, %d bytes: got %d bytes (%v)", tlsOn, size, len(got), err)
			}
			want := 0
			if size >= Threshold {
				want = 1
			}
			if during != want || after != 0 {
				t.Errorf("TLS %v, %d bytes: TCP_CORK %d while writing (want %d), %d after (want 0)", tlsOn, size, during, want, after)
			}
		}
	}
}
