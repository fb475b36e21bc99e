// Command hello is an example process worker: an HTTP server that greets and shows what the
// runtime tells it about each request. It serves on $HOST:$PORT, or, when the runtime hands it
// a listening socket (listen: socket or worker_network isolated: LISTEN_FDS=1 and LISTEN_PID
// its own pid, the socket being descriptor 3, as systemd's socket activation does), on that
// socket.
package main

import (
	"encoding/json"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
)

func main() {
	greeting := os.Getenv("GREETING")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"message":   greeting + " from a process worker",
			"path":      r.URL.Path,             // the path below the worker's base
			"base":      r.Header.Get("X-Base"), // where the worker is mounted, e.g. /hello-process
			"requestId": r.Header.Get("X-Request-Id"),
			"client":    r.Header.Get("X-Forwarded-For"),
		})
	})
	l, err := listener()
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("hello listening on %s", l.Addr()) // stdout and stderr end up in the runtime's log
	log.Fatal(http.Serve(l, nil))
}

// listener is the socket the runtime hands over as descriptor 3, if it does, else a new one on
// $HOST:$PORT.
func listener() (net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "1" && os.Getenv("LISTEN_PID") == strconv.Itoa(os.Getpid()) {
		return net.FileListener(os.NewFile(3, "listener"))
	}
	return net.Listen("tcp", os.Getenv("HOST")+":"+os.Getenv("PORT"))
}
