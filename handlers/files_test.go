package handlers

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

const fileTestRoot = "a-root-key-for-the-file-tests"

// fileTestAPI serves an API over temporary worker and plugin folders, with a key store, and
// returns the data folder and the audit log.
func fileTestAPI(t *testing.T) (*API, func(*http.Request) *http.Response, string, *observer.ObservedLogs) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"apps/app/1.0.0/manifest.yaml":       "name: app\nversion: 1.0.0\n",
		"apps/app/1.0.0/index.html":          "<h1>app</h1>",
		"apps/@team/web/1.0.0/manifest.yaml": "name: '@team/web'\nversion: 1.0.0\n",
		"apps/@team/web/1.0.0/index.html":    "<h1>web</h1>",
		".apps/core/1.0.0/manifest.yaml":     "name: core\nversion: 1.0.0\n",
		"plugins/hello/manifest.yaml":        "name: hello\nversion: 1.0.0\n",
	})
	store := openStore(t, dir)
	workers := packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, ".apps"), filepath.Join(dir, "apps")}, packages.DefaultLimits)
	plugins := packages.NewCatalog(packages.PluginLayout, []string{filepath.Join(dir, "plugins")}, packages.DefaultLimits)
	core, logs := observer.New(zapcore.InfoLevel)
	a, v := testAPI(t, Options{RootKey: fileTestRoot, Logger: zap.New(core), Workers: workers, Plugins: plugins,
		Keys: func() (*keystore.Store, error) { return store, nil }})
	do := func(req *http.Request) *http.Response {
		t.Helper()
		if req.Header.Get(APIKeyHeader) == "" {
			req.Header.Set(APIKeyHeader, fileTestRoot)
		}
		return serve(t, a, v, req)
	}
	return a, do, dir, logs
}

func jsonRequest(method, target string, body any) *http.Request {
	b, _ := json.Marshal(body)
	req := httptest.NewRequest(method, target, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return req
}

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var env api.Envelope
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return env.Error.Code
}

func TestFileRoutesWithoutCatalogs(t *testing.T) {
	a, v := testAPI(t, Options{RootKey: fileTestRoot})
	for _, target := range []string{"/api/workers/files/list", "/api/plugins/files/list?path=plugins"} {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set(APIKeyHeader, fileTestRoot)
		if resp := serve(t, a, v, req); resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, resp) != envelope.CodeNotReady {
			t.Errorf("%s without catalogs = %d", target, resp.StatusCode)
		}
	}
}

func TestFileRoutes(t *testing.T) {
	_, do, dir, logs := fileTestAPI(t)

	resp := do(httptest.NewRequest("GET", "/api/workers/files/list", nil))
	var list api.FileListResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&list) != nil || len(list.Data.Entries) != 2 ||
		list.Data.Entries[0].Visibility != "built-in" || list.Data.Entries[1].Visibility != "uploaded" {
		t.Fatalf("roots = %d %+v", resp.StatusCode, list)
	}

	steps := []struct {
		req    *http.Request
		status int
		code   string
	}{
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/app/1.0.0/a/b"}), 200, ""},
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/app/1.0.0/a/b"}), 409, "FILE_EXISTS"},
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/app/2.0.0"}), 403, "PATH_FORBIDDEN"},
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: ".apps/core/1.0.0/x"}), 403, "READ_ONLY"},
		{jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/../../etc"}), 400, "PATH_TRAVERSAL"},
		{jsonRequest("POST", "/api/workers/files/mkdir", map[string]any{"path": 1}), 400, "BAD_REQUEST"},
		{jsonRequest("POST", "/api/workers/files/rename", api.FileRenameRequest{Path: "apps/app/1.0.0/a", NewName: "z"}), 200, ""},
		{jsonRequest("POST", "/api/workers/files/move", api.FileMoveRequest{Path: "apps/app/1.0.0/z", DestPath: "apps/@team/web/1.0.0"}), 200, ""},
		{jsonRequest("DELETE", "/api/workers/files/delete", api.FilePathRequest{Path: "apps/@team/web/1.0.0/z"}), 200, ""},
		{jsonRequest("DELETE", "/api/workers/files/delete", api.FilePathRequest{Path: "apps/@team/web/1.0.0/z"}), 404, "FILE_NOT_FOUND"},
		{jsonRequest("DELETE", "/api/workers/files/delete", api.FilePathRequest{Path: "apps/app"}), 403, "PATH_FORBIDDEN"},
		{jsonRequest("POST", "/api/plugins/files/mkdir", api.FilePathRequest{Path: "plugins/hello/x"}), 200, ""},
		{jsonRequest("DELETE", "/api/plugins/files/delete", api.FilePathRequest{Path: "plugins/hello"}), 403, "PATH_FORBIDDEN"},
		{jsonRequest("POST", "/api/workers/files/refresh", nil), 200, ""},
		{httptest.NewRequest("POST", "/api/workers/files/refresh", nil), 200, ""},
		{httptest.NewRequest("GET", "/api/workers/files/refresh?path=apps/nope", nil), 404, "FILE_NOT_FOUND"},
		{jsonRequest("POST", "/api/workers/files/delete-batch", api.FileBatchRequest{}), 400, "BAD_REQUEST"},
		{httptest.NewRequest("GET", "/api/workers/files/download-batch?paths=apps/nope/1.0.0/x", nil), 404, "FILE_NOT_FOUND"},
	}
	for _, s := range steps {
		resp := do(s.req)
		if resp.StatusCode != s.status || s.code != "" && errorCode(t, resp) != s.code {
			t.Errorf("%s %s = %d, want %d %s", s.req.Method, s.req.URL, resp.StatusCode, s.status, s.code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "plugins/hello/x")); err != nil {
		t.Error("plugin mkdir did not create the folder")
	}

	resp = do(jsonRequest("POST", "/api/workers/files/delete-batch", api.FileBatchRequest{Paths: []string{"apps/app/1.0.0/index.html", "apps/app/1.0.0/nope", "apps/app"}}))
	var batch api.FileBatchResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&batch) != nil || !batch.Success || len(batch.Errors) != 2 ||
		!strings.HasPrefix(batch.Errors[0], "apps/app/1.0.0/nope: ") {
		t.Errorf("delete-batch = %d %+v", resp.StatusCode, batch)
	}

	resp = do(httptest.NewRequest("GET", "/api/workers/files/download?path=apps/@team/web/1.0.0/index.html", nil))
	if body := bodyOf(t, resp); resp.StatusCode != 200 || body != "<h1>web</h1>" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename=index.html` || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("download = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp = do(httptest.NewRequest("GET", "/api/workers/files/download-batch?paths=apps/@team/web/1.0.0/index.html,apps/app/1.0.0/manifest.yaml", nil))
	body := []byte(bodyOf(t, resp))
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if resp.StatusCode != 200 || err != nil || len(zr.File) != 2 || resp.Header.Get("Content-Type") != "application/zip" {
		t.Errorf("download-batch = %d %v", resp.StatusCode, err)
	}

	// One audit line per write, with its outcome.
	outcomes := map[string]int{}
	for _, e := range logs.FilterMessage("audit").All() {
		ctx := e.ContextMap()
		if action, _ := ctx["action"].(string); strings.HasPrefix(action, "files.") {
			outcomes[action+" "+ctx["outcome"].(string)]++
		}
	}
	want := map[string]int{"files.mkdir success": 2, "files.mkdir failed": 1, "files.mkdir denied": 3, "files.rename success": 1,
		"files.move success": 1, "files.delete success": 1, "files.delete failed": 1, "files.delete denied": 2, "files.delete-batch denied": 1}
	for k, n := range want {
		if outcomes[k] != n {
			t.Errorf("audit %s = %d, want %d (all: %v)", k, outcomes[k], n, outcomes)
		}
	}
}

// TestFileNamespaces runs a restricted key against every kind of route.
func TestFileNamespaces(t *testing.T) {
	a, do, _, _ := fileTestAPI(t)
	store, _ := a.keys()
	created, err := store.Create(context.Background(), keystore.NewKey{Name: "team", Role: keystore.RoleAdmin, Namespaces: []string{"@team"}})
	if err != nil {
		t.Fatal(err)
	}
	as := func(req *http.Request) *http.Request {
		req.Header.Set(APIKeyHeader, created.Secret)
		req.Header.Set("Origin", "http://example.com")
		return req
	}
	resp := do(as(httptest.NewRequest("GET", "/api/workers/files/list?path=apps", nil)))
	var list api.FileListResponse
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data.Entries) != 1 || list.Data.Entries[0].Name != "@team" {
		t.Fatalf("restricted root listing = %+v", list)
	}
	for _, req := range []*http.Request{
		httptest.NewRequest("GET", "/api/workers/files/list?path=apps/app", nil),
		httptest.NewRequest("GET", "/api/workers/files/download?path=apps/app/1.0.0/index.html", nil),
		httptest.NewRequest("GET", "/api/workers/files/refresh?path=apps/app", nil),
		jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/app/1.0.0/x"}),
		jsonRequest("DELETE", "/api/workers/files/delete", api.FilePathRequest{Path: "apps/app/1.0.0/index.html"}),
		jsonRequest("POST", "/api/workers/files/rename", api.FileRenameRequest{Path: "apps/app/1.0.0/index.html", NewName: "x"}),
		jsonRequest("POST", "/api/workers/files/move", api.FileMoveRequest{Path: "apps/@team/web/1.0.0/index.html", DestPath: "apps/app/1.0.0"}),
		jsonRequest("POST", "/api/workers/files/move", api.FileMoveRequest{Path: "apps/app/1.0.0/index.html", DestPath: "apps/@team/web/1.0.0"}),
		jsonRequest("POST", "/api/workers/files/move-batch", api.FileMoveBatchRequest{Paths: []string{"apps/@team/web/1.0.0/index.html"}, DestPath: "apps/app/1.0.0"}),
	} {
		if resp := do(as(req)); resp.StatusCode != 403 || errorCode(t, resp) != CodeNamespaceDenied {
			t.Errorf("%s %s as @team = %d", req.Method, req.URL, resp.StatusCode)
		}
	}
	resp = do(as(httptest.NewRequest("GET", "/api/workers/files/download-batch?paths=apps/app/1.0.0/index.html", nil)))
	if resp.StatusCode != 404 || !strings.Contains(bodyOf(t, resp), "outside") {
		t.Errorf("restricted download-batch of another namespace = %d", resp.StatusCode)
	}
	resp = do(as(jsonRequest("POST", "/api/workers/files/mkdir", api.FilePathRequest{Path: "apps/@team/web/1.0.0/ok"})))
	if resp.StatusCode != 200 {
		t.Errorf("restricted mkdir in its namespace = %d", resp.StatusCode)
	}
}

// writeTree writes files, by slash-separated path below dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// openStore opens a key store in dir for the test.
func openStore(t *testing.T, dir string) *keystore.Store {
	t.Helper()
	store, err := keystore.Open(context.Background(), filepath.Join(dir, "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// multipartBody builds an upload form; parts are (field, filename, content), a part without
// a file name being a text field.
func multipartBody(t *testing.T, parts ...[3]string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p[1] == "" {
			w, err = mw.CreateFormField(p[0])
		} else {
			w, err = mw.CreateFormFile(p[0], p[1])
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(p[2]))
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func TestFileUpload(t *testing.T) {
	_, do, dir, _ := fileTestAPI(t)
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("site/page.html")
	_, _ = w.Write([]byte("page"))
	zw.Close()
	// paths[] after the files they name, as a browser's FormData may send them.
	body, ct := multipartBody(t,
		[3]string{"files[]", "a.txt", "A"},
		[3]string{"files[]", "b.txt", "B"},
		[3]string{"files[]", "bundle.zip", zbuf.String()},
		[3]string{"path", "", "apps/app/1.0.0/up"},
		[3]string{"paths[]", "", "x/a.txt"},
		[3]string{"paths[]", "", ""},
		[3]string{"paths[]", "", "z/bundle.zip"})
	req := httptest.NewRequest("POST", "/api/workers/files/upload", body)
	req.Header.Set("Content-Type", ct)
	resp := do(req)
	var out api.FileUploadResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Data.Files != 3 || out.Data.Bytes != 6 {
		t.Fatalf("upload = %d %+v", resp.StatusCode, out)
	}
	for rel, want := range map[string]string{"x/a.txt": "A", "b.txt": "B", "z/site/page.html": "page"} {
		if b, err := os.ReadFile(filepath.Join(dir, "apps/app/1.0.0/up", rel)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v", rel, b, err)
		}
	}

	for _, tt := range []struct {
		name   string
		parts  [][3]string
		status int
		code   string
	}{
		{"no path", [][3]string{{"files[]", "a.txt", "A"}}, 400, "BAD_REQUEST"},
		{"unknown field", [][3]string{{"path", "", "apps/app/1.0.0"}, {"other", "", "x"}}, 400, "BAD_REQUEST"},
		{"paths[] mismatch", [][3]string{{"path", "", "apps/app/1.0.0"}, {"files[]", "a.txt", "A"}, {"paths[]", "", "a"}, {"paths[]", "", "b"}}, 400, "BAD_REQUEST"},
		{"traversal in paths[]", [][3]string{{"path", "", "apps/app/1.0.0"}, {"files[]", "a.txt", "A"}, {"paths[]", "", "../../../x"}}, 400, "PATH_TRAVERSAL"},
		{"version level", [][3]string{{"path", "", "apps/app"}, {"files[]", "a.txt", "A"}}, 403, "PATH_FORBIDDEN"},
		{"built-in", [][3]string{{"path", "", ".apps/core/1.0.0"}, {"files[]", "a.txt", "A"}}, 403, "READ_ONLY"},
		{"corrupt zip", [][3]string{{"path", "", "apps/app/1.0.0"}, {"files[]", "a.zip", "nope"}}, 400, "INVALID_ARCHIVE"},
	} {
		body, ct := multipartBody(t, tt.parts...)
		req := httptest.NewRequest("POST", "/api/workers/files/upload", body)
		req.Header.Set("Content-Type", ct)
		if resp := do(req); resp.StatusCode != tt.status || errorCode(t, resp) != tt.code {
			t.Errorf("%s = %d, want %d %s", tt.name, resp.StatusCode, tt.status, tt.code)
		}
	}
	req = httptest.NewRequest("POST", "/api/workers/files/upload", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if resp := do(req); resp.StatusCode != 400 {
		t.Errorf("upload without a form = %d", resp.StatusCode)
	}
}

// uploadOf starts reading req as a file manager upload of at most limit bytes.
func uploadOf(t *testing.T, req *http.Request, limit int64) *multipartUpload {
	t.Helper()
	up, err := readMultipart(httptest.NewRecorder(), req, limit, envelope.CodeBadRequest, "send a form")
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// TestReadUploadFormLimits checks the upload size and file count limits on the form itself.
func TestReadUploadFormLimits(t *testing.T) {
	limits := packages.Limits{Upload: 10, Unpacked: 100, Entries: 2}
	for _, tt := range []struct {
		name    string
		parts   [][3]string
		setting string
	}{
		{"one file over the size", [][3]string{{"path", "", "p"}, {"files[]", "a", strings.Repeat("x", 11)}}, packages.UploadSetting},
		{"files together over the size", [][3]string{{"path", "", "p"}, {"files[]", "a", "123456"}, {"files[]", "b", "123456"}}, packages.UploadSetting},
		{"too many files", [][3]string{{"path", "", "p"}, {"files[]", "a", "1"}, {"files[]", "b", "2"}, {"files[]", "c", "3"}}, packages.EntriesSetting},
	} {
		body, ct := multipartBody(t, tt.parts...)
		req := httptest.NewRequest("POST", "/api/workers/files/upload", body)
		req.Header.Set("Content-Type", ct)
		spool, err := os.CreateTemp(t.TempDir(), "spool")
		if err != nil {
			t.Fatal(err)
		}
		_, err = readUploadForm(uploadOf(t, req, limits.Upload), spool, limits)
		spool.Close()
		var pe *packages.Error
		if !errors.As(err, &pe) || pe.Kind != packages.TooLarge || !strings.Contains(pe.Message, tt.setting) {
			t.Errorf("%s: %v, want 413 naming %s", tt.name, err, tt.setting)
		}
	}
	body, ct := multipartBody(t, [3]string{"path", "", "p"}, [3]string{"files[]", "a", "12345"}, [3]string{"files[]", "b", "12345"})
	req := httptest.NewRequest("POST", "/", body)
	req.Header.Set("Content-Type", ct)
	spool, _ := os.CreateTemp(t.TempDir(), "spool")
	defer spool.Close()
	form, err := readUploadForm(uploadOf(t, req, limits.Upload), spool, limits)
	if err != nil || len(form.files) != 2 || form.dest != "p" {
		t.Fatalf("a form at the limits = %+v, %v", form, err)
	}
	b, _ := io.ReadAll(io.NewSectionReader(form.files[1].Data, 0, form.files[1].Size))
	if string(b) != "12345" {
		t.Errorf("second file = %q", b)
	}
}
