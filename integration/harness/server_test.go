package harness

import (
	"net"
	"testing"
)

// TestStartOnATakenPort: a runtime whose port was taken between FreePort and its start, as the
// local port of an outgoing connection (from the same range) can take it, starts again on other
// ports instead of failing the test.
func TestStartOnATakenPort(t *testing.T) {
	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := net.Dial("tcp", peer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	port := conn.LocalAddr().(*net.TCPAddr).Port
	given := FreePort
	t.Cleanup(func() { FreePort = given })
	first := true
	FreePort = func(tb testing.TB) int {
		if first {
			first = false
			return port
		}
		return given(tb)
	}

	s := Start(t, Config{})
	if s.Port == port {
		t.Fatalf("the runtime serves on port %d, the local port of another connection", port)
	}
	if resp := s.Get(s.API + "/health"); resp.Status != 200 {
		t.Fatalf("GET health = %s", resp)
	}
	if first {
		t.Fatal("Start did not ask FreePort for the port")
	}
}
