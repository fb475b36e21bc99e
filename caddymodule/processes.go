package caddymodule

import (
	"context"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/internal/workers"
)

// processes is the state's part that runs process workers: the pool, confined by the
// sandbox, the log book that WebAssembly workers write into too, and the pool's gauges. The
// state hands the pool to requests only once the activations are loaded (state.activate).
type processes struct {
	settings config.Settings
	logger   *zap.Logger
	secrets  func(ctx context.Context, worker string) (map[string]string, error)
	// databases gives workers with database: true theirs.
	databases *databases.Manager
	// pool and logs are set by Start.
	pool    *workers.Pool
	logs    *workers.LogBook
	unmeter func() // takes the pool out of the process gauge
	unwatch func() // stops sampling the pool's memory for the history
}

// Start prepares the sandbox and builds the pool.
func (p *processes) Start() error {
	sb, err := newSandbox(p.settings, p.logger)
	if err != nil {
		return err
	}
	s := p.settings
	logs := workers.NewLogBook(s.WorkerLogLines)
	pool, err := workers.NewPool(workers.PoolOptions{
		Size: s.PoolSize, Logger: p.logger.Named("workers"), Path: os.Getenv("PATH"),
		Sandbox: sb, ScratchDir: s.ScratchDir, Allowed: s.ProcessWorkers.Allows,
		LogRate:   s.WorkerLogRate,
		Logs:      logs,
		Events:    runtimeMetrics,
		Secrets:   p.secrets,
		Databases: p.databases,

		FreshConcurrency: s.WorkerFreshConcurrency,
		FreshQueue:       s.WorkerFreshQueue,

		// Beside the scratch folders, which every worker account reaches (state_dir is the
		// runtime's alone, 0700).
		JS: &workers.JSHost{Engines: s.JSEngines, Dir: filepath.Join(s.ScratchDir, workers.JSDir),
			Registry: s.JSRegistry, InstallTimeout: s.JSInstallTimeout},
	})
	if err != nil {
		return err
	}
	p.pool, p.logs = pool, logs
	p.unmeter = runtimeMetrics.AddPool(func() map[string]int {
		out := map[string]int{}
		for state, n := range pool.Counts() {
			out[string(state)] = n
		}
		return out
	})
	// The memory charts: the processes' resident memory by worker, once a history step.
	p.unwatch = runtimeMetrics.History().WatchMemory(func() map[string]int64 {
		out := map[string]int64{}
		for _, st := range pool.Status() {
			if st.RSS >= 0 {
				out[st.Name] += st.RSS
			}
		}
		return out
	})
	return nil
}

// Stop takes the pool out of the gauges, then closes it.
func (p *processes) Stop() error {
	p.unmeter()
	p.unwatch() // before the pool closes under it
	p.pool.Close()
	return nil
}

// newSandbox prepares the confinement of process workers and logs which layers are in force.
func newSandbox(st config.Settings, logger *zap.Logger) (*sandbox.Sandbox, error) {
	sb, err := sandbox.New(sandbox.Options{
		User: st.WorkerUser, Group: st.WorkerGroup, ReadDirs: st.WorkerReadDirs,
		IsolateNetwork: st.WorkerNetwork == config.NetworkIsolated,
		Caps: sandbox.Limits{Memory: st.WorkerMemory, Processes: st.WorkerProcesses, Files: st.WorkerMaxFiles, CPU: st.WorkerCPU, Scratch: st.WorkerScratch,
			Database: st.WorkerDatabase},
		Private: append(append([]string{st.StateDir, st.ScratchDir}, st.WorkerDirs...), st.PluginDirs...),
	})
	if err != nil {
		return nil, err
	}
	layers := sb.Layers()
	logger.Info("process worker sandbox",
		zap.String("layers", layers.String()), zap.String("worker_user", layers.User),
		zap.String("process_workers", st.ProcessWorkers.String()))
	if st.ProcessWorkers.All || len(st.ProcessWorkers.List) > 0 {
		for _, w := range layers.Warnings {
			logger.Warn("process worker sandbox: "+w.Text, w.Docs.Field())
		}
	}
	return sb, nil
}
