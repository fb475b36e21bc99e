// Command testworker is a process worker for tests: an HTTP server on $HOST:$PORT that
// reports what it received and can sleep, crash, or misbehave at start on request.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Echo is what / answers.
type Echo struct {
	PID     int               `json:"pid"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Env     []string          `json:"env"`
	Body    int               `json:"body"`
	Args    []string          `json:"args"`
	Dir     string            `json:"dir"`
}

func main() {
	if d, err := time.ParseDuration(os.Getenv("START_DELAY")); err == nil {
		time.Sleep(d)
	}
	if os.Getenv("EXIT_AT_START") != "" {
		fmt.Fprintln(os.Stderr, "exiting at start as asked")
		os.Exit(2)
	}
	fmt.Println("testworker listening on", os.Getenv("HOST")+":"+os.Getenv("PORT"))
	http.HandleFunc("/crash", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(os.Stderr, "crashing as asked")
		os.Exit(3)
	})
	http.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-time.After(d):
			fmt.Fprintln(w, "slept", d)
		case <-r.Context().Done():
		}
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		e := Echo{PID: os.Getpid(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Headers: map[string]string{}, Env: os.Environ(), Body: int(n), Args: os.Args[1:]}
		e.Dir, _ = os.Getwd()
		for k, v := range r.Header {
			e.Headers[k] = strings.Join(v, ", ")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "worker-set-id") // the runtime's id must win
		json.NewEncoder(w).Encode(e)
	})
	if err := http.ListenAndServe(os.Getenv("HOST")+":"+os.Getenv("PORT"), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
