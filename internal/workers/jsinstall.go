package workers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/sandbox"
)

// CodeInstallFailed refuses the upload of a JavaScript worker whose autoInstall failed.
const CodeInstallFailed = "INSTALL_FAILED"

// DefaultJSInstallTimeout bounds an autoInstall when js_install_timeout is unset.
const DefaultJSInstallTimeout = 2 * time.Minute

// installFiles are the files of a worker's folder an install reads: its package.json and the
// engines' lock files. Nothing else is copied for the install, so the worker's own .npmrc or
// bunfig.toml cannot name another registry or turn scripts back on.
var installFiles = []string{"package.json", "bun.lock", "bun.lockb", "package-lock.json", "npm-shrinkwrap.json", "deno.json", "deno.jsonc", "deno.lock"}

// maxInstallOutput bounds the install's output kept for the upload's answer (its end).
const maxInstallOutput = 16 << 10

// InstallError is a failed autoInstall: why, and the engine's output.
type InstallError struct {
	Reason string
	Output string
}

func (e *InstallError) Error() string {
	if e.Output == "" {
		return e.Reason
	}
	return e.Reason + "; its output:\n" + e.Output
}

// installArgv is the frozen, script-less install of each engine: the lock file must match
// package.json and no package's lifecycle script runs (Deno runs none unless allowed).
func installArgv(engine, binary string) ([]string, error) {
	switch engine {
	case RuntimeBun:
		return []string{binary, "install", "--frozen-lockfile", "--ignore-scripts", "--no-progress", "--no-save"}, nil
	case RuntimeDeno:
		return []string{binary, "install", "--frozen", "--node-modules-dir=manual"}, nil
	}
	// Node has no installer of its own: npm, the one it ships with, beside it.
	npm := filepath.Join(filepath.Dir(binary), "npm")
	if _, err := os.Stat(npm); err != nil {
		return nil, fmt.Errorf("autoInstall on node needs npm beside %s, which this server lacks: run the worker on bun or deno (runtime:), or ship node_modules", binary)
	}
	return []string{npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"}, nil
}

// Installed is what an autoInstall did: the engine's output (its end) and what it added to
// the version, node_modules.
type Installed struct {
	Output string
	Files  int
	Bytes  int64
}

// Install runs the install of the JavaScript worker name@version of manifest m (autoInstall)
// whose staged folder is tree, before it is installed: the package.json and lock files are
// copied into a folder of the runtime's (JSHost.Dir), the engine installs there, confined as
// the worker will be (its sandbox, its limits, its account), with the install's folder its
// only writable one besides a scratch folder, holding at most limit bytes (what is left of
// max_unpacked_size; 0: unbounded) and worker_database_size, which caps every data folder,
// and its network the registry alone (js_registry), within js_install_timeout; then
// node_modules is moved into tree, the runtime's and read-only to others, so the version
// folder is complete, and immutable, once installed.
func (p *Pool) Install(ctx context.Context, name, version, tree string, m Manifest, limit int64) (Installed, error) {
	h := p.opts.JS
	if h == nil {
		return Installed{}, errors.New("this runtime runs no JavaScript workers")
	}
	engine, binary, ok := h.Engines.Path(m.Runtime)
	if !ok {
		return Installed{}, checkEngine(m, h.Engines)
	}
	argv, err := installArgv(engine, binary)
	if err != nil {
		return Installed{}, &InstallError{Reason: err.Error()}
	}
	if _, err := os.Stat(filepath.Join(tree, "package.json")); err != nil {
		return Installed{}, &InstallError{Reason: "autoInstall: true needs a package.json (and its lock file) at the worker's root"}
	}
	if err := os.MkdirAll(filepath.Join(h.Dir, "install"), 0o711); err != nil {
		return Installed{}, err
	}
	work, err := os.MkdirTemp(filepath.Join(h.Dir, "install"), "")
	if err != nil {
		return Installed{}, err
	}
	defer os.RemoveAll(work)
	for _, f := range installFiles {
		body, err := os.ReadFile(filepath.Join(tree, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(work, f), body, 0o644)
		}
		if err != nil {
			return Installed{}, err
		}
	}

	scratch := scratchFolder(p.opts.ScratchDir, name, version+"-install")
	// Bun links its cache into node_modules and wants both, and its temporary files, on one
	// file system: all in the install's folder, of which node_modules alone is kept.
	env := []string{"PATH=" + p.opts.Path, "HOME=" + scratch, "TMPDIR=" + scratch, "NO_COLOR=1", "CI=1",
		"BUN_INSTALL_CACHE_DIR=" + filepath.Join(work, ".bun-cache"), "BUN_TMPDIR=" + filepath.Join(work, ".bun-tmp"),
		"DENO_DIR=" + filepath.Join(scratch, "deno"), "DENO_NO_UPDATE_CHECK=1",
		"npm_config_cache=" + filepath.Join(scratch, "npm"), "npm_config_update_notifier=false"}
	if h.Registry != "" {
		// Bun, npm and Deno's npm resolver each read one of these.
		env = append(env, "BUN_CONFIG_REGISTRY="+h.Registry, "NPM_CONFIG_REGISTRY="+h.Registry, "npm_config_registry="+h.Registry)
	}
	var out tail
	var over atomic.Pointer[error]
	limits := m.Limits.sandbox()
	limits.Database = limit // the watcher of the data folder bounds the install's (worker_database_size caps it)
	spec := sandbox.Spec{Argv: argv, Dir: work, ReadPaths: []string{engineFolder(binary)}, Env: env, Scratch: scratch,
		Limits: limits, Data: work, OverData: func(reason error) { over.Store(&reason) }, Endpoint: h.registryEndpoint()}
	cmd, err := p.opts.Sandbox.Start(spec, &out, &out)
	if err != nil {
		return Installed{}, fmt.Errorf("starting the install: %w", err)
	}
	timeout := h.InstallTimeout
	if timeout <= 0 {
		timeout = DefaultJSInstallTimeout
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var reason string
	select {
	case err = <-done:
	case <-timer.C:
		cmd.Kill()
		err = <-done
		reason = fmt.Sprintf("%s did not finish within %s (setting js_install_timeout)", strings.Join(argv[1:3], " "), timeout)
	case <-ctx.Done():
		cmd.Kill()
		<-done
		return Installed{Output: out.String()}, ctx.Err()
	}
	result := Installed{Output: out.String()}
	if over := over.Load(); over != nil && reason == "" {
		reason = fmt.Sprintf("the install was stopped: %v; it may write what max_unpacked_size leaves beside the upload's files, "+
			"and at most worker_database_size: ship fewer dependencies, or ask the operator to raise them", *over)
	}
	if reason == "" && err != nil {
		reason = fmt.Sprintf("%s %s failed (%s)", filepath.Base(argv[0]), strings.Join(argv[1:], " "), cmd.State())
	}
	if reason != "" {
		return result, &InstallError{Reason: reason, Output: result.Output}
	}
	modules := filepath.Join(tree, "node_modules")
	if err := moveTree(filepath.Join(work, "node_modules"), modules); err != nil {
		return result, fmt.Errorf("moving node_modules into the version: %w", err)
	}
	if result.Files, result.Bytes, err = seal(modules); err != nil {
		return result, fmt.Errorf("node_modules: %w", err)
	}
	if limit > 0 && result.Bytes > limit {
		return result, &InstallError{Reason: fmt.Sprintf("node_modules holds %d bytes, more than the %d max_unpacked_size leaves beside the upload's files: "+
			"ship fewer dependencies, or ask the operator to raise max_unpacked_size", result.Bytes, limit), Output: result.Output}
	}
	return result, nil
}

// seal makes the tree dir the runtime's, writable by it alone, with no set-id bit (the
// install's account wrote it), and counts its regular files and their bytes. A missing dir
// holds nothing.
func seal(dir string) (files int, bytes int64, err error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	err = filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(file, os.Geteuid(), os.Getegid()); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			files++
			bytes += info.Size()
		}
		return os.Chmod(file, info.Mode().Perm()&^0o022)
	})
	return files, bytes, err
}

// registryEndpoint is the install's one way out: an HTTP proxy on the listener the sandbox
// hands it (inside an isolated network's namespace, else on the loopback), named by
// HTTP(S)_PROXY, that reaches the registry's host and port alone: a lock file naming a
// tarball elsewhere gets 403. Nil without js_registry, the engine's default registry then
// being reached as the worker reaches the network.
func (h *JSHost) registryEndpoint() func(net.Listener) []string {
	registry, err := url.Parse(h.Registry)
	if h.Registry == "" || err != nil {
		return nil
	}
	allowed := registry.Host
	if registry.Port() == "" {
		allowed = net.JoinHostPort(registry.Hostname(), map[string]string{"https": "443"}[registry.Scheme]+map[string]string{"http": "80"}[registry.Scheme])
	}
	forward := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL }}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if r.Method != http.MethodConnect {
			host = r.URL.Host
			if r.URL.Port() == "" {
				host = net.JoinHostPort(r.URL.Hostname(), "80")
			}
		}
		if host != allowed {
			http.Error(w, "the install reaches the registry "+h.Registry+" alone (setting js_registry)", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodConnect {
			forward.ServeHTTP(w, r)
			return
		}
		upstream, err := net.DialTimeout("tcp", host, 10*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer upstream.Close()
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(upstream, rw); upstream.(*net.TCPConn).CloseWrite() }()
		_, _ = io.Copy(conn, upstream)
	})
	return func(ln net.Listener) []string {
		go func() { _ = (&http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
		proxy := "http://" + ln.Addr().String()
		return []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy}
	}
}

// moveTree moves folder src to dst (which must not exist): renamed where both are on one
// file system, else copied. A link that leads out of src is dropped: the version's folder
// must name nothing outside it. A missing src (nothing to install) is no error.
func moveTree(src, dst string) error {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := dropEscapingLinks(src); err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	return filepath.WalkDir(src, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, file)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(file)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(file, target, info.Mode().Perm()&0o755)
		}
		return nil // a device, a socket, a pipe: nothing a module needs
	})
}

// dropEscapingLinks removes the symbolic links under dir that are absolute or lead out of it.
func dropEscapingLinks(dir string) error {
	return filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		link, err := os.Readlink(file)
		if err != nil {
			return err
		}
		resolved := filepath.Join(filepath.Dir(file), link)
		if rel, err := filepath.Rel(dir, resolved); filepath.IsAbs(link) || err != nil || !filepath.IsLocal(rel) {
			return os.Remove(file)
		}
		return nil
	})
}

// copyFile copies the regular file src to a new file dst with mode perm.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// tail keeps the last maxInstallOutput bytes written to it, safe for two writers.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - maxInstallOutput; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.buf.String())
}
