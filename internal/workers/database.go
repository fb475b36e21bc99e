package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/sandbox"
)

// databaseTimeout bounds the readying of a worker's database at its start (a namespace
// created on the primary).
const databaseTimeout = 10 * time.Second

// attachDatabase gives the process of spec its database: the folder it may write or the
// endpoint it reaches, and the variables naming it, written over any the manifest's env or a
// secret set.
func (pr *proc) attachDatabase(spec *sandbox.Spec) error {
	dbs := pr.pool.opts.Databases
	if dbs == nil {
		return errors.New("this runtime gives workers no database (database: true)")
	}
	limit := spec.Limits.Cap(pr.pool.opts.Sandbox.Caps()).Database
	ctx, cancel := context.WithTimeout(context.Background(), databaseTimeout)
	defer cancel()
	att, err := dbs.Attach(ctx, pr.name, limit, pr.overDatabase)
	if err != nil {
		return fmt.Errorf("its database: %w", err)
	}
	spec.Env = slices.DeleteFunc(spec.Env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(databases.Variables, name)
	})
	spec.Data, spec.DataEnv, spec.OverData, spec.Endpoint = att.Folder, att.Env, att.Over, att.Endpoint
	return nil
}

// overDatabase tells, in the runtime's log and the worker's own, that its database passed its
// limit. In local mode the sandbox stops the process next, as for its scratch folder; in
// primary mode the endpoint refuses its statements until the database is back within it.
func (pr *proc) overDatabase(reason error) {
	pr.logger.Warn("worker passed its database limit", zap.String("reason", reason.Error()), zap.String("setting", databases.Setting))
	pr.pool.opts.Logs.Append(pr.name, LogLine{Time: time.Now(), Version: pr.version, PID: int(pr.pid.Load()), Stream: "stderr",
		Text: databases.OverLine(reason)})
	if pr.pool.opts.Databases.Mode() == databases.ModeLocal {
		pr.retireNow()
	}
}
