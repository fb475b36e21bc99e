// Command testwasm is a WebAssembly worker for tests (GOOS=wasip1 GOARCH=wasm): a CGI program
// that reports what it received, by PATH_INFO:
//
//	/          the request as JSON (method, path, query, environment, body); ?status=N answers N,
//	           ?cookie=C sets the cookie C too
//	/loop      never ends
//	/alloc     allocates memory until it fails
//	/read      reads the file ?path= and answers its bytes, or the error
//	/global    reads a global, sets it to ?set=, waits ?wait= ms and answers both reads
//	/stderr    writes ?text= to standard error
//	/big       writes ?n= bytes of body
//	/exit      exits with status ?code= without writing anything
//	/raw       writes a body with no CGI headers
//	/headers   writes ?n= bytes of CGI header lines, then a body
//	/hold      holds ?mb= MiB of memory for ?wait= ms, then answers
//	/append    appends the line ?v= to ?file= (default rows.txt) in its database folder (the
//	           folder, /.database)
//	/fill      appends ?kib= KiB (default 64) to fill.bin there ?n= times, until a write fails
//	/symlink   makes the symbolic link ?name= to ?target= in its database folder, then reads
//	           through it
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Echo is what / answers.
type Echo struct {
	Method string            `json:"method"`
	Script string            `json:"script"`
	Path   string            `json:"path"`
	Query  string            `json:"query"`
	Env    map[string]string `json:"env"`
	Body   string            `json:"body"`
	Args   []string          `json:"args"`
}

// global is what /global reads and writes: a second request sharing the instance would see
// another's value.
var global string

// hold keeps what /alloc allocates reachable.
var hold [][]byte

func main() {
	q, _ := url.ParseQuery(os.Getenv("QUERY_STRING"))
	switch os.Getenv("PATH_INFO") {
	case "/loop":
		for n := 0; ; n++ {
			if n < 0 {
				fmt.Print(n)
			}
		}
	case "/alloc":
		for {
			hold = append(hold, bytes.Repeat([]byte{1}, 8<<20)) // touched, so really used
		}
	case "/read":
		b, err := os.ReadFile(q.Get("path"))
		if err != nil {
			answer(404, "error: "+err.Error())
			return
		}
		answer(200, string(b))
	case "/global":
		before := global
		global = q.Get("set")
		ms, _ := strconv.Atoi(q.Get("wait"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		answer(200, before+"|"+global)
	case "/stderr":
		fmt.Fprintln(os.Stderr, q.Get("text"))
		answer(200, "logged")
	case "/big":
		n, _ := strconv.Atoi(q.Get("n"))
		fmt.Print("Content-Type: text/plain\r\n\r\n")
		os.Stdout.Write([]byte(strings.Repeat("x", n)))
	case "/exit":
		code, _ := strconv.Atoi(q.Get("code"))
		os.Exit(code)
	case "/headers":
		n, _ := strconv.Atoi(q.Get("n"))
		line := "X-Filler: " + strings.Repeat("h", 55) + "\n" // 66 bytes
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(line)
		}
		fmt.Print(b.String() + "Content-Type: text/plain\n\nok")
	case "/hold":
		mb, _ := strconv.Atoi(q.Get("mb"))
		for range mb {
			hold = append(hold, bytes.Repeat([]byte{1}, 1<<20))
		}
		ms, _ := strconv.Atoi(q.Get("wait"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		answer(200, fmt.Sprintf("held %d MiB", len(hold)))
	case "/raw":
		fmt.Print("no headers here")
	case "/append":
		name := q.Get("file")
		if name == "" {
			name = "rows.txt"
		}
		f, err := os.OpenFile(filepath.Join(dataDir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err == nil {
			_, err = fmt.Fprintln(f, q.Get("v"))
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			answer(500, "error: "+err.Error())
			return
		}
		answer(200, "appended")
	case "/fill":
		n, _ := strconv.Atoi(q.Get("n"))
		kib, _ := strconv.Atoi(q.Get("kib"))
		if kib <= 0 {
			kib = 64
		}
		f, err := os.OpenFile(filepath.Join(dataDir, "fill.bin"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		written := 0
		for ; err == nil && written < n; written++ {
			_, err = f.Write(bytes.Repeat([]byte{'x'}, kib<<10))
		}
		if f != nil {
			f.Close()
		}
		if err != nil {
			written--
			answer(200, fmt.Sprintf("wrote %d, error: %v", written, err))
			return
		}
		answer(200, fmt.Sprintf("wrote %d", written))
	case "/symlink":
		link := filepath.Join(dataDir, q.Get("name"))
		err := os.Symlink(q.Get("target"), link)
		b, rerr := os.ReadFile(link)
		if rerr != nil {
			answer(404, fmt.Sprintf("symlink: %v, read: %v", err, rerr))
			return
		}
		answer(200, string(b))
	default:
		body, _ := io.ReadAll(os.Stdin)
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		out, _ := json.Marshal(Echo{Method: os.Getenv("REQUEST_METHOD"), Script: os.Getenv("SCRIPT_NAME"), Path: os.Getenv("PATH_INFO"),
			Query: os.Getenv("QUERY_STRING"), Env: env, Body: string(body), Args: os.Args})
		status := q.Get("status")
		if status == "" {
			status = "200"
		}
		extra := ""
		if c := q.Get("cookie"); c != "" { // a cookie of the caller's choosing
			extra = "Set-Cookie: " + c + "\r\n"
		}
		fmt.Printf("Status: %s\r\nContent-Type: application/json\r\nX-Wasm: yes\r\nX-Request-Id: the-module's\r\nX-Worker-Version: 9.9.9\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n%s\r\n%s", status, extra, out)
	}
}

func answer(status int, body string) {
	fmt.Printf("Status: %d\nContent-Type: text/plain\n\n%s", status, body)
}

// dataDir is where a worker with database: true finds its folder.
const dataDir = "/.database"
