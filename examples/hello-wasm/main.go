// Command hello-wasm is a WebAssembly worker: a Go program built for WASI preview 1
// (GOOS=wasip1 GOARCH=wasm) that the runtime runs for each request, in a fresh instance.
//
// The request arrives as CGI: its method, path, query and headers in environment variables
// (REQUEST_METHOD, SCRIPT_NAME the worker's base, PATH_INFO the path below it, QUERY_STRING,
// HTTP_*), its body on standard input. The answer goes to standard output: headers (Status:,
// Content-Type: …), a blank line, the body. Go's net/http/cgi speaks that contract, so the
// worker is an ordinary http.Handler, under its base (SCRIPT_NAME, e.g. /hello-wasm or
// /hello-wasm@1.0.0); standard error goes to the worker's logs.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"strings"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", hello)
	mux.HandleFunc("POST /echo", echo)
	mux.HandleFunc("GET /file", file)
	if err := cgi.Serve(http.StripPrefix(os.Getenv("SCRIPT_NAME"), mux)); err != nil {
		fmt.Fprintln(os.Stderr, "serving:", err)
		os.Exit(1)
	}
}

// hello answers with a greeting and what the request was.
func hello(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(os.Stderr, "hello: %s %s\n", r.Method, r.URL.Path) // into the worker's logs
	greeting := os.Getenv("GREETING")                              // the manifest's env
	writeJSON(w, http.StatusOK, map[string]string{
		"message":   greeting + " from a WebAssembly worker",
		"base":      os.Getenv("SCRIPT_NAME"),
		"path":      r.URL.Path,
		"query":     r.URL.RawQuery,
		"requestId": r.Header.Get("X-Request-Id"),
	})
}

// echo answers with the body it was sent.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"echo": string(body)})
}

// file answers with a file of the worker's folder, its whole (read-only) file system.
func file(w http.ResponseWriter, r *http.Request) {
	b, err := os.ReadFile(strings.TrimPrefix(r.URL.Query().Get("name"), "/"))
	if err != nil {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
