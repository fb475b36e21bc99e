//go:build !linux

package sandbox

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// Sandbox starts workers; outside Linux it has no confinement layers.
type Sandbox struct{ opts Options }

// New returns a sandbox that starts workers plainly; a separate worker account needs Linux.
func New(opts Options) (*Sandbox, error) {
	if opts.User != "" {
		return nil, fmt.Errorf("worker_user is supported on Linux only")
	}
	if opts.IsolateNetwork {
		return nil, fmt.Errorf("worker_network isolated is supported on Linux only (network namespaces); use host")
	}
	return &Sandbox{opts: opts}, nil
}

// Layers reports that no layer is in force but the scratch watcher.
func (s *Sandbox) Layers() Layers {
	return Layers{Scratch: ScratchWatcher, Warnings: []Warning{{"process workers run unconfined: the sandbox needs Linux (Landlock, cgroups)", troubleshooting.Unconfined}}}
}

// IsolatedNetwork is false: outside Linux workers share the host's network.
func (s *Sandbox) IsolatedNetwork() bool { return false }

// SocketActivation is false: outside Linux no listener is handed over (Spec.Listen), and
// workers listen on a port.
func (s *Sandbox) SocketActivation() bool { return false }

// Close does nothing here.
func (s *Sandbox) Close() {}

// Process is a running worker.
type Process struct {
	cmd      *exec.Cmd
	release  func() // ends the guard that stops the worker with the runtime
	scratch  string
	unwatch  func()       // stops the scratch watcher
	endpoint net.Listener // Spec.Endpoint's, closed once the worker has exited
}

// closeEndpoint closes the listener of Spec.Endpoint, if any.
func (p *Process) closeEndpoint() {
	if p.endpoint != nil {
		p.endpoint.Close()
	}
}

// Start starts the worker of spec; its output goes to stdout and stderr.
func (s *Sandbox) Start(spec Spec, stdout, stderr io.Writer) (*Process, error) {
	if err := os.RemoveAll(spec.Scratch); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.Scratch, 0o700); err != nil {
		return nil, err
	}
	if spec.Data != "" {
		if err := os.MkdirAll(spec.Data, 0o700); err != nil {
			return nil, fmt.Errorf("database folder: %w", err)
		}
	}
	p := &Process{scratch: spec.Scratch}
	env := spec.Env
	if spec.Data != "" && spec.DataEnv != nil {
		env = append(slices.Clip(env), spec.DataEnv(spec.Data)...)
	}
	if spec.Endpoint != nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p.endpoint = ln
		env = append(slices.Clip(env), spec.Endpoint(ln)...)
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		p.closeEndpoint()
		removeScratch(spec.Scratch)
		return nil, err
	}
	release, err := guard(cmd)
	if err != nil {
		kill(cmd)
		_ = cmd.Wait()
		p.closeEndpoint()
		removeScratch(spec.Scratch)
		return nil, fmt.Errorf("worker would outlive the runtime: %w", err)
	}
	p.cmd, p.release = cmd, release
	limits := spec.Limits.Cap(s.opts.Caps)
	p.unwatch = both(watch(spec, limits.Scratch, p.Kill), watchData(spec, limits.Database, p.Kill))
	return p, nil
}

// Pid is the worker's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// State describes how the worker exited, once Wait has returned.
func (p *Process) State() string { return p.cmd.ProcessState.String() }

// Wait waits for the worker to exit and removes its scratch folder.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	p.unwatch()
	p.release()
	p.closeEndpoint()
	removeScratch(p.scratch)
	return err
}

// Socket is "": outside Linux workers share the host's network.
func (p *Process) Socket() string { return "" }

// Pending is false: there is no listener to watch.
func (p *Process) Pending() bool { return false }

// Serving does nothing here: no launcher is started ahead of need.
func (p *Process) Serving() {}

// Terminate asks the worker to stop.
func (p *Process) Terminate() { terminate(p.cmd) }

// Kill stops the worker at once.
func (p *Process) Kill() { kill(p.cmd) }

// CheckListener returns a placeholder listener: outside Linux the runtime cannot tell whose a
// listener is, so a worker is taken to listen once its port accepts a connection (weaker:
// another process that binds the port first is taken for the worker).
func (p *Process) CheckListener(int) ([]uint64, error) { return []uint64{0}, nil }

// StillListens returns known: outside Linux the runtime cannot tell whose a listener is.
func (p *Process) StillListens(_ int, known []uint64) ([]uint64, error) { return known, nil }
