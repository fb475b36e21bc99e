// Package databases gives each worker whose manifest says database: true a SQLite-compatible
// database of its own, which outlives its versions and processes and which no other worker
// can open. In local mode it is a SQLite file in a folder of the worker's own under state_dir,
// which the sandbox lets that worker alone write, bounded by a watcher (the worker opens the
// file itself, so nothing of the runtime stands between it and its writes). In sync and
// cluster mode it is a namespace on the libSQL primary, created through sqld's admin API; the
// worker reaches it through an endpoint of the runtime on a loopback it can reach, with a
// token of its own process, and the endpoint forwards to that namespace alone with the
// primary's credentials, which the worker never sees. Either way the worker finds it in
// DATABASE_URL, which libSQL clients take as it is.
package databases

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddy-runtime/runtime/internal/sandbox"
)

// Modes of a worker's database, as the API names them.
const (
	ModeLocal   = "local"   // a SQLite file under state_dir
	ModePrimary = "primary" // a namespace on the libSQL primary
)

// File is the name of a local database in its worker's folder.
const File = "db.sqlite"

// Variables a process with a database gets.
const (
	URLVar   = "DATABASE_URL"
	PathVar  = "DATABASE_PATH"       // local mode: the file's path
	TokenVar = "DATABASE_AUTH_TOKEN" // primary mode: the endpoint's token (also in the URL)
)

// WasmURL is a WebAssembly worker's DATABASE_URL: its database is reached through the
// runtime's host module (wasm.DatabaseModule), whatever the mode, which the guest driver
// (package wasmdb) opens as sql.Open("runtime", os.Getenv("DATABASE_URL")).
const WasmURL = "runtime:"

// Variables are the names the runtime sets for a worker with a database; a manifest's env
// and a secret may not take them.
var Variables = []string{URLVar, PathVar, TokenVar}

// Manager hands out the workers' databases of one runtime.
type Manager struct {
	dir    string  // local mode: state_dir/databases
	remote *Remote // nil in local mode

	refuse error // why no worker gets a database (a setting missing), or nil

	mu     sync.Mutex
	over   map[string]string   // why a worker's database was last refused, by worker
	rooms  map[string]*room    // WebAssembly workers with instances running, by worker
	locals map[string]*localDB // local databases open for WebAssembly instances, by worker
}

// New returns the manager of databases kept in dir (local mode), or on the primary remote
// reaches when remote is not nil.
func New(dir string, remote *Remote) *Manager {
	return &Manager{dir: dir, remote: remote, over: map[string]string{}, rooms: map[string]*room{}, locals: map[string]*localDB{}}
}

// Refusing returns a manager in primary mode that refuses every database with err (a
// setting it needs is missing): workers without one run all the same.
func Refusing(err error) *Manager {
	return &Manager{remote: &Remote{}, refuse: err, over: map[string]string{}, rooms: map[string]*room{}, locals: map[string]*localDB{}}
}

// Mode is ModeLocal or ModePrimary.
func (m *Manager) Mode() string {
	if m.remote != nil {
		return ModePrimary
	}
	return ModeLocal
}

// Folder is the local database folder of worker: one path segment per worker, '/' of a
// scoped name written '+', as scratch folders write it (no name holds '+').
func (m *Manager) Folder(worker string) string {
	return filepath.Join(m.dir, strings.ReplaceAll(worker, "/", "+"))
}

// Attachment is what a process of a worker with a database starts with.
type Attachment struct {
	// Folder is the folder it may write (local mode), "" in primary mode.
	Folder string
	// Env names the database, given the folder as the process reaches it (local mode).
	Env func(dir string) []string
	// Endpoint serves its database on a listener it can reach and returns the variables
	// naming it (primary mode); nil in local mode.
	Endpoint func(ln net.Listener) []string
	// Over is what the sandbox tells once the folder passes its limit (local mode): the
	// manager keeps the reason for the API, and passes it on to Attach's over.
	Over func(reason error)
}

// Attach readies worker's database for a process about to start, bounded by limit bytes;
// over hears why once the database passes its limit. A local database already past its
// limit is refused: the worker would be stopped again a second after each start.
func (m *Manager) Attach(ctx context.Context, worker string, limit int64, over func(reason error)) (Attachment, error) {
	report := func(reason error) {
		m.record(worker, reason)
		if over != nil {
			over(reason)
		}
	}
	if m.refuse != nil {
		return Attachment{}, m.refuse
	}
	if m.remote != nil {
		ns := Namespace(worker)
		if err := m.remote.Ensure(ctx, ns); err != nil {
			return Attachment{}, err
		}
		m.clear(worker)
		return Attachment{Endpoint: m.remote.endpoint(ns, limit, report)}, nil
	}
	dir := m.Folder(worker)
	if used, err := m.within(worker, limit); err != nil {
		if used > limit && over != nil {
			over(err)
		}
		return Attachment{}, err
	}
	return Attachment{Folder: dir, Env: LocalEnv,
		Over: func(reason error) { report(fmt.Errorf("%w: %s", reason, advice)) }}, nil
}

// LocalEnv names the local database file in dir, the folder as the worker reaches it.
func LocalEnv(dir string) []string {
	file := path.Join(filepath.ToSlash(dir), File)
	return []string{URLVar + "=file:" + file, PathVar + "=" + file}
}

// within measures worker's local database folder against limit bytes (0: none): it returns
// the bytes used, or LimitError past limit (recorded for the API), and clears what was
// recorded when it is within.
func (m *Manager) within(worker string, limit int64) (int64, error) {
	if limit <= 0 {
		m.clear(worker)
		return 0, nil
	}
	used, err := sandbox.Usage(m.Folder(worker), limit)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("its database folder cannot be measured: %w", err)
	}
	if used > limit {
		err := LimitError(limit)
		m.record(worker, err)
		return used, err
	}
	m.clear(worker)
	return used, nil
}

// room is what the running WebAssembly instances of a worker may still write to its folder:
// the limit less the folder as last measured (at most remeasureEvery ago), less what they wrote
// since; shared, so instances running at once cannot each write what was left.
type room struct {
	left     atomic.Int64
	limit    int64
	measured time.Time
	users    int
}

// remeasureEvery spaces the measures of a folder whose worker's instances keep running, as
// the scratch watcher spaces its own: a write counted since (an overwrite too) is given back by
// the next measure.
const remeasureEvery = time.Second

// Wasm readies worker's database folder for one WebAssembly instance, bounded by limit
// bytes (0: none), creating it: the folder, the bytes the worker's running instances may still
// write to it (nil: no bound), and done, to call once the instance has ended. A folder past its
// limit is refused with LimitError. In primary mode there is no folder (dir is ""): each
// instance of the runtime would have its own, and the database is on the primary.
func (m *Manager) Wasm(worker string, limit int64) (dir string, left *atomic.Int64, done func(), err error) {
	if m.remote != nil {
		return "", nil, func() {}, nil
	}
	dir = m.Folder(worker)
	if limit <= 0 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", nil, nil, fmt.Errorf("creating its database folder: %w", err)
		}
		return dir, nil, func() {}, nil
	}
	m.mu.Lock()
	r := m.rooms[worker]
	if r == nil || r.limit != limit { // a new version's limit measures again
		r = &room{limit: limit}
		m.rooms[worker] = r
	}
	r.users++
	fresh := time.Since(r.measured) < remeasureEvery
	m.mu.Unlock()
	done = func() {
		m.mu.Lock()
		if r.users--; r.users == 0 && m.rooms[worker] == r {
			delete(m.rooms, worker)
		}
		m.mu.Unlock()
	}
	if !fresh {
		used, err := m.within(worker, limit)
		if err == nil {
			err = os.MkdirAll(dir, 0o700)
		}
		if err != nil {
			done()
			return "", nil, nil, err
		}
		m.mu.Lock()
		r.left.Store(limit - used)
		r.measured = time.Now()
		m.mu.Unlock()
	}
	return dir, &r.left, done, nil
}

// Full records that a WebAssembly instance of worker had a write refused at its database's
// limit, and returns why, which the API shows until a later measure finds the folder within.
func (m *Manager) Full(worker string, limit int64) error {
	err := fmt.Errorf("the worker's writes reached its database's limit of %s and were refused: %s", humanize.IBytes(uint64(limit)), advice)
	m.record(worker, err)
	return err
}

func (m *Manager) record(worker string, reason error) {
	m.mu.Lock()
	m.over[worker] = reason.Error()
	m.mu.Unlock()
}

// Setting names what bounds a worker's database, for the logs.
const Setting = "limits.database, capped by worker_database_size"

// OverLine is the line a worker's log gets when its database passed its limit.
func OverLine(reason error) string {
	return "runtime: the worker's database passed its limit (" + Setting + "): " + reason.Error()
}

// advice says what to do about a database past its limit, naming the settings.
const advice = "raise the manifest's limits.database (capped by the worker_database_size setting), or delete rows"

// LimitError is why a database past limit bytes is refused.
func LimitError(limit int64) error {
	return fmt.Errorf("the worker's database holds more than its limit of %s: %s", humanize.IBytes(uint64(limit)), advice)
}

func (m *Manager) clear(worker string) {
	m.mu.Lock()
	delete(m.over, worker)
	m.mu.Unlock()
}

// Info is what the API shows of a worker's database.
type Info struct {
	Mode  string
	Size  int64  // bytes; -1 when it cannot be measured now
	Error string // why it was last refused or stopped its worker, "" when it was not
}

// Info measures worker's database.
func (m *Manager) Info(ctx context.Context, worker string) Info {
	info := Info{Mode: m.Mode()}
	m.mu.Lock()
	info.Error = m.over[worker]
	m.mu.Unlock()
	var err error
	switch {
	case m.refuse != nil:
		info.Size, err = -1, m.refuse
	case m.remote != nil:
		info.Size, err = m.remote.Size(ctx, Namespace(worker))
	default:
		info.Size, err = sandbox.Usage(m.Folder(worker), 1<<62)
		if errors.Is(err, os.ErrNotExist) {
			info.Size, err = 0, nil
		}
	}
	if err != nil {
		info.Size = -1
		if info.Error == "" {
			info.Error = err.Error()
		}
	}
	return info
}

// Purge removes worker's database for good.
func (m *Manager) Purge(ctx context.Context, worker string) error {
	m.clear(worker)
	if m.refuse != nil {
		return m.refuse
	}
	if m.remote != nil {
		return m.remote.Delete(ctx, Namespace(worker))
	}
	m.closeLocal(worker)
	if err := os.RemoveAll(m.Folder(worker)); err != nil {
		return fmt.Errorf("removing the worker's database: %w", err)
	}
	return nil
}

// Namespace is the primary's namespace of worker's database: a DNS label (sqld takes the
// namespace from the first label of the request's host) derived from the name alone, so every
// instance names the same one, and no name can choose another worker's.
func Namespace(worker string) string {
	sum := sha256.Sum256([]byte(worker))
	return "w-" + hex.EncodeToString(sum[:16])
}
