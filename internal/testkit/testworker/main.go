// Command testworker is a process worker for tests: an HTTP server on $HOST:$PORT, or on the
// listener it is handed as descriptor 3 (LISTEN_FDS=1 and LISTEN_PID its own pid, unless
// IGNORE_LISTEN_FDS is set), that reports what it received and can sleep, crash, or misbehave
// at start on request. Each query parameter set=Name:value adds a response header, on every
// path; /upgrade switches protocols (an echo of bytes) with those headers; /headers?n=N answers
// a head of N bytes of header lines; /html answers an HTML page with the worker's pid.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// Tick is a request to /tick/… the worker received (what a cron trigger sends), as /ticks lists it.
type Tick struct {
	At        time.Time `json:"at"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Cron      []string  `json:"cron"` // the Runtime-Cron header's lines
	RequestID string    `json:"requestId"`
}

// ticks are the ticks received, oldest first.
var ticks struct {
	sync.Mutex
	list []Tick
}

// recordTick records a request to /tick/…, then answers after ?sleep (a Go duration) and with
// ?status (204 by default).
func recordTick(w http.ResponseWriter, r *http.Request) {
	ticks.Lock()
	ticks.list = append(ticks.list, Tick{At: time.Now(), Method: r.Method, Path: r.URL.Path, Cron: r.Header.Values("Runtime-Cron"),
		RequestID: r.Header.Get("X-Request-Id")})
	ticks.Unlock()
	if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	status, err := strconv.Atoi(r.URL.Query().Get("status"))
	if err != nil {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

// startFDs are the descriptors the worker was started with, read before main runs.
var startFDs = openFDs()

func main() {
	switch os.Getenv("TESTWORKER_MODE") {
	case "syscalls": // print what trySyscalls reports and exit
		json.NewEncoder(os.Stdout).Encode(trySyscalls())
		return
	case "fds": // print the descriptors it was started with and exit
		json.NewEncoder(os.Stdout).Encode(startFDs)
		return
	case "sleeper":
		time.Sleep(10 * time.Minute)
		return
	case "daemonize":
		// Start a sleeper in a session of its own, print its pid and leave it orphaned.
		p, err := startSelf("sleeper", true)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(p.Pid)
		return
	}
	attacks()
	if d, err := time.ParseDuration(os.Getenv("START_DELAY")); err == nil {
		time.Sleep(d)
	}
	if os.Getenv("EXIT_AT_START") != "" {
		fmt.Fprintln(os.Stderr, "exiting at start as asked")
		os.Exit(2)
	}
	if rate, _ := strconv.Atoi(os.Getenv("FLOOD_RATE")); rate > 0 {
		go flood(rate)
	}
	http.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		h := http.Header{"Upgrade": {r.Header.Get("Upgrade")}, "Connection": {"Upgrade"}}
		setHeaders(h, r)
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\n")
		h.Write(rw)
		fmt.Fprint(rw, "\r\n")
		rw.Flush()
		io.Copy(conn, rw)
	})
	http.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		// An answer head of about n bytes of header lines, written as it goes, then "ok": the
		// head a proxy must stop reading at its limit.
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		line := "X-Filler: " + strings.Repeat("h", 54) + "\r\n" // 66 bytes
		rw.WriteString("HTTP/1.1 200 OK\r\n")
		for written := 0; written < n; written += len(line) {
			if _, err := rw.WriteString(line); err != nil {
				return
			}
		}
		rw.WriteString("Content-Length: 2\r\nConnection: close\r\n\r\nok")
		rw.Flush()
	})
	http.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		// A page with its pid; stream=1 writes it in two parts with a flush between, of a
		// length not known ahead.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		setHeaders(w.Header(), r)
		head := "<!doctype html><html><head><title>testworker</title></head>"
		body := fmt.Sprintf("<body>pid %d</body></html>", os.Getpid())
		if r.URL.Query().Get("stream") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(body)))
			fmt.Fprint(w, head+body)
			return
		}
		fmt.Fprint(w, head)
		http.NewResponseController(w).Flush()
		fmt.Fprint(w, body)
	})
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
	http.HandleFunc("/tick/", recordTick)
	http.HandleFunc("/ticks", func(w http.ResponseWriter, r *http.Request) {
		ticks.Lock()
		defer ticks.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(append([]Tick{}, ticks.list...))
	})
	http.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		// n bytes of JSON-like text in one write, as a bare net/http server answers.
		body := filler(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
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
		setHeaders(w.Header(), r)
		json.NewEncoder(w).Encode(e)
	})
	l, err := listener()
	if err == nil {
		http.HandleFunc("/unlisten", func(w http.ResponseWriter, r *http.Request) {
			// Closes the listener and lives on, leaving its port to whoever binds it next.
			unlistened.Store(true)
			w.Header().Set("Connection", "close")
			fmt.Fprintln(w, "closing the listener")
			l.Close()
		})
		fmt.Println("testworker listening on", l.Addr())
		err = http.Serve(l, nil)
	}
	if unlistened.Load() {
		select {} // as asked: no listener, still running
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// unlistened is set once /unlisten closed the listener.
var unlistened atomic.Bool

// held keeps the connections /hold opened, so they stay open.
var (
	holding sync.Mutex
	held    []net.Conn
)

// fillers keeps the answers of /bytes by size, built once.
var fillers sync.Map

// filler returns n bytes of text (none for an n not between 0 and 1 MiB), the same bytes for
// the same n.
func filler(count string) []byte {
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 || n > 1<<20 {
		n = 0
	}
	if b, ok := fillers.Load(n); ok {
		return b.([]byte)
	}
	b := []byte(strings.Repeat(`{"key":"value"},`, n/16+1)[:n])
	fillers.Store(n, b)
	return b
}

// listener is the socket handed over as descriptor 3, else a new one on $HOST:$PORT.
func listener() (net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "1" && os.Getenv("LISTEN_PID") == strconv.Itoa(os.Getpid()) && os.Getenv("IGNORE_LISTEN_FDS") == "" {
		return net.FileListener(os.NewFile(3, "listener"))
	}
	return net.Listen("tcp", os.Getenv("HOST")+":"+os.Getenv("PORT"))
}

// attacks are what a hostile worker tries: reading and writing files, filling its scratch
// folder, leaving orphans, forking, allocating and flooding its output. Each answers 200 with
// what it achieved, or 403 with the error that stopped it. /syscalls and /fds answer JSON: the
// outcome of each call that leaves a sandbox (trySyscalls), and the descriptors the worker was
// started with.
func attacks() {
	http.HandleFunc("/syscalls", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(trySyscalls())
	})
	http.HandleFunc("/fds", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(startFDs)
	})
	http.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		w.Write(b)
	})
	http.HandleFunc("/list", func(w http.ResponseWriter, r *http.Request) {
		entries, err := os.ReadDir(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		for _, e := range entries {
			fmt.Fprintln(w, e.Name())
		}
	})
	http.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(r.URL.Query().Get("path"), []byte("written by a worker"), 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		fmt.Fprintln(w, "written")
	})
	http.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout(r.URL.Query().Get("network"), r.URL.Query().Get("addr"), 2*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		defer c.Close()
		// What the other end says first, if anything: an HTTP server says nothing.
		c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(io.LimitReader(c, 64))
		fmt.Fprintf(w, "connected: %s", b)
	})
	http.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		// Opens up to n connections to addr, one after the other until one fails, and keeps
		// them open for as long as the worker runs, as a descriptor flood would.
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		holding.Lock()
		defer holding.Unlock()
		var last error
		for range n {
			c, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), time.Second)
			if err != nil {
				last = err
				break
			}
			held = append(held, c)
		}
		json.NewEncoder(w).Encode(map[string]any{"held": len(held), "error": fmt.Sprint(last)})
	})
	http.HandleFunc("/listen", func(w http.ResponseWriter, r *http.Request) {
		// A listener beside the worker's own, on the worker's loopback: it greets and hangs up.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "hello from %d", os.Getpid())
				c.Close()
			}
		}()
		fmt.Fprint(w, l.Addr())
	})
	http.HandleFunc("/orphan", func(w http.ResponseWriter, r *http.Request) {
		cmd := exec.Command(self())
		cmd.Env = append(os.Environ(), "TESTWORKER_MODE=daemonize")
		out, err := cmd.Output()
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		w.Write(out)
	})
	http.HandleFunc("/fork", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		started := 0
		var last error
		for range n {
			if _, err := startSelf("sleeper", false); err != nil {
				last = err
				break
			}
			started++
		}
		json.NewEncoder(w).Encode(map[string]any{"started": started, "error": fmt.Sprint(last)})
	})
	http.HandleFunc("/alloc", func(w http.ResponseWriter, r *http.Request) {
		mb, _ := strconv.Atoi(r.URL.Query().Get("mb"))
		var held [][]byte
		for range mb {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			held = append(held, b)
		}
		fmt.Fprintf(w, "allocated %d MiB\n", len(held))
	})
	http.HandleFunc("/fill", func(w http.ResponseWriter, r *http.Request) {
		mb, _ := strconv.Atoi(r.URL.Query().Get("mb"))
		written, err := fill(filepath.Join(os.TempDir(), "fill"), mb)
		json.NewEncoder(w).Encode(map[string]any{"written": written, "error": fmt.Sprint(err)})
	})
	http.HandleFunc("/say", func(w http.ResponseWriter, r *http.Request) {
		out := os.Stdout
		if r.URL.Query().Get("stream") == "stderr" {
			out = os.Stderr
		}
		fmt.Fprintln(out, r.URL.Query().Get("text"))
		fmt.Fprintln(w, "said")
	})
	http.HandleFunc("/sayenv", func(w http.ResponseWriter, r *http.Request) {
		// Prints an environment variable's value, which the request never carries (a secret).
		fmt.Printf("%s is %s.\n", r.URL.Query().Get("name"), os.Getenv(r.URL.Query().Get("name")))
		fmt.Fprintln(w, "said")
	})
	http.HandleFunc("/flood", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("lines"))
		for i := range n {
			fmt.Printf("flood line %d\n", i)
		}
		fmt.Fprintln(w, "flooded")
	})
}

// flood writes rate lines a second to stdout for as long as the worker runs, as a chatty
// program with a buffered logger does: the lines of each 10 ms go out in one write.
func flood(rate int) {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	tick := time.NewTicker(10 * time.Millisecond)
	start, written := time.Now(), 0
	for range tick.C {
		due := int(time.Since(start).Seconds() * float64(rate))
		for ; written < due; written++ {
			fmt.Fprintf(out, "flood line %d: the quick brown fox jumps over the lazy dog\n", written)
		}
		out.Flush()
	}
}

// fill writes mb MiB of data to path, one MiB at a time and synced, and reports how many MiB it
// wrote before the first error.
func fill(path string, mb int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for n := range mb {
		if _, err := f.Write(chunk); err != nil {
			return n, err
		}
		if err := f.Sync(); err != nil {
			return n, err
		}
	}
	return mb, nil
}

func self() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// startSelf starts this program again in a mode, in a session of its own if asked.
func startSelf(mode string, setsid bool) (*os.Process, error) {
	cmd := exec.Command(self())
	cmd.Env = append(os.Environ(), "TESTWORKER_MODE="+mode)
	if setsid {
		newSession(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Process, nil
}

// setHeaders adds the headers the query's set=Name:value parameters ask for.
func setHeaders(h http.Header, r *http.Request) {
	for _, kv := range r.URL.Query()["set"] {
		if name, value, ok := strings.Cut(kv, ":"); ok {
			h.Add(name, value)
		}
	}
}
