// Command hello is an example process worker: an HTTP server on $HOST:$PORT that greets and
// shows what the runtime tells it about each request.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
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
	addr := os.Getenv("HOST") + ":" + os.Getenv("PORT")
	log.Printf("hello listening on %s", addr) // stdout and stderr end up in the runtime's log
	log.Fatal(http.ListenAndServe(addr, nil))
}
