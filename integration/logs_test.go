package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type logLine struct {
	Seq                         uint64
	Time, Version, Stream, Text string
	PID                         int
}

func logs(t *testing.T, s *harness.Server, worker, query, key string) []logLine {
	t.Helper()
	var out struct {
		Worker string
		Lines  []logLine
	}
	resp := s.Get(s.API+"/workers/"+worker+"/logs"+query, harness.WithKey(key))
	if resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET logs%s = %s", query, resp)
	}
	return out.Lines
}

func lineTexts(lines []logLine) string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return strings.Join(out, ",")
}

func say(t *testing.T, s *harness.Server, worker, text, stream string) {
	t.Helper()
	if resp := s.Get("/" + worker + "/say?text=" + text + "&stream=" + stream); resp.Status != 200 {
		t.Fatalf("say = %s", resp)
	}
}

// sse is a followed log stream.
type sse struct {
	resp   *http.Response
	events chan [2]string // event, data
}

func follow(t *testing.T, s *harness.Server, worker, query, key string) *sse {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+s.API+"/workers/"+worker+"/logs?follow=1"+query, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := &sse{resp: resp, events: make(chan [2]string, 1000)}
	go func() {
		defer close(st.events)
		sc := bufio.NewScanner(resp.Body)
		var event, data string
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
				if event != "" {
					st.events <- [2]string{event, data}
				}
				event, data = "", ""
			case strings.HasPrefix(line, ": following"):
				st.events <- [2]string{"following", ""}
			case strings.HasPrefix(line, "event: "):
				event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
	}()
	return st
}

// next returns the next event, failing the test after a while.
func (st *sse) next(t *testing.T) (string, string) {
	t.Helper()
	select {
	case e, ok := <-st.events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e[0], e[1]
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return "", ""
}

// nextLine returns the next line event's text.
func (st *sse) nextLine(t *testing.T) logLine {
	t.Helper()
	for {
		event, data := st.next(t)
		if event == "line" {
			var l logLine
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatal(err)
			}
			return l
		}
		if event != "following" {
			t.Fatalf("event %s %s", event, data)
		}
	}
}

// TestWorkerLogs reads and follows workers' output: per worker, in order, filtered, bounded,
// within the key's namespaces, and ending cleanly on reload.
func TestWorkerLogs(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_WORKER_LOG_LINES": "200"}}
	s := harness.Start(t, cfg)
	processWorker(t, s, "@team/talk", "1.0.0", "")
	processWorker(t, s, "quiet", "1.0.0", "")
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "viewer", "namespaces": []string{"@team"}}).Secret

	if got := logs(t, s, "@team/talk", "", rootKey); len(got) != 0 {
		t.Fatalf("logs before the worker ran = %+v", got)
	}
	say(t, s, "@team/talk", "a1", "stdout")
	say(t, s, "quiet", "b1", "stdout")
	say(t, s, "@team/talk", "a2", "stderr")
	pid := echoOf(t, s.Get("/@team/talk/")).PID
	harness.EventuallyNil(t, 5*time.Second, func() error {
		if got := lineTexts(logs(t, s, "@team/talk", "", team)); !strings.HasSuffix(got, ",a1,a2") || strings.Contains(got, "b1") {
			return fmt.Errorf("talk's lines = %s", got)
		}
		return nil
	})
	all := logs(t, s, "@team/talk", "", team)
	if !strings.HasPrefix(all[0].Text, "testworker listening on") || all[0].Seq != 1 || all[0].Version != "1.0.0" || all[0].PID <= 0 ||
		all[0].Stream != "stdout" || all[2].Stream != "stderr" || all[2].Seq != 3 {
		t.Fatalf("lines = %+v (worker pid %d)", all, pid)
	}
	if _, err := time.Parse(time.RFC3339Nano, all[1].Time); err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string]string{
		"?stream=stderr":        "a2",
		"?limit=1":              "a2",
		"?since=" + all[1].Time: "a2",
	} {
		if got := lineTexts(logs(t, s, "@team/talk", query, team)); got != want {
			t.Errorf("logs%s = %s, want %s", query, got, want)
		}
	}
	for _, tt := range []struct {
		path, key string
		status    int
		code      string
	}{
		{"/workers/_/quiet/logs", team, 403, "NAMESPACE_DENIED"},
		{"/workers/_/nope/logs", rootKey, 404, "WORKER_NOT_FOUND"},
		{"/workers/@team/talk/logs?limit=0", team, 400, "BAD_REQUEST"},
		{"/workers/@team/talk/logs?since=yesterday", team, 400, "BAD_REQUEST"},
		{"/workers/@team/talk/logs?stream=both", team, 400, "BAD_REQUEST"},
	} {
		if resp := s.Get(s.API+tt.path, harness.WithKey(tt.key)); resp.Status != tt.status || resp.ErrorCode() != tt.code {
			t.Errorf("GET %s = %s, want %d %s", tt.path, resp, tt.status, tt.code)
		}
	}

	// Following: the backlog, then new lines of this worker only, in order.
	st := follow(t, s, "@team/talk", "&limit=1", team)
	if l := st.nextLine(t); l.Text != "a2" {
		t.Fatalf("backlog = %+v", l)
	}
	say(t, s, "@team/talk", "a3", "stdout")
	say(t, s, "quiet", "b2", "stdout")
	say(t, s, "@team/talk", "a4", "stderr")
	if a3, a4 := st.nextLine(t), st.nextLine(t); a3.Text != "a3" || a4.Text != "a4" || a4.Seq != a3.Seq+1 || a4.Stream != "stderr" {
		t.Fatalf("followed %+v then %+v", a3, a4)
	}

	// A flood stays within the ring: the newest 200 lines.
	if resp := s.Get("/@team/talk/flood?lines=5000"); resp.Status != 200 {
		t.Fatalf("flood = %s", resp)
	}
	harness.EventuallyNil(t, 10*time.Second, func() error {
		got := logs(t, s, "@team/talk", "?limit=1000", team)
		if len(got) != 200 || got[199].Text != "flood line 4999" || got[0].Text != "flood line 4800" {
			return fmt.Errorf("after the flood: %d lines, last %+v", len(got), got[len(got)-1])
		}
		return nil
	})

	// A reload ends the stream with an end event.
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	for {
		event, data := st.next(t)
		if event == "end" {
			if !strings.Contains(data, "reconnect") {
				t.Errorf("end event = %s", data)
			}
			break
		}
	}
	if _, ok := <-st.events; ok {
		t.Fatal("the stream went on after its end event")
	}
	// The lines survive the reload.
	if got := logs(t, s, "@team/talk", "?limit=1", team); len(got) != 1 || got[0].Text != "flood line 4999" {
		t.Fatalf("after the reload: %+v", got)
	}
}
