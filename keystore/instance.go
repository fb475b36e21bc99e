package keystore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// InstanceIDFile is the name of the file, in the state folder, that keeps the instance's id.
const InstanceIDFile = "instance-id"

// instanceIDPattern is what an instance id may be: the generated 32 hex digits, or a name an
// operator wrote into the file.
var instanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// InstanceID returns the id of the instance whose state folder is stateDir, from
// InstanceIDFile there; the first call creates it (mode 0600) with a random id, so that
// instances sharing a primary, several on one machine included, are told apart across
// restarts. A damaged file is an error naming it, not replaced: a new id would make the
// instance look like another.
func InstanceID(stateDir string) (string, error) {
	root, err := os.OpenRoot(stateDir)
	if err != nil {
		return "", fmt.Errorf("instance id: opening the state folder: %w", err)
	}
	defer root.Close()
	path := filepath.Join(stateDir, InstanceIDFile)
	id, err := readInstanceID(root, path)
	if !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id = hex.EncodeToString(b)
	// Written whole under another name, then linked into place: a crash leaves no half-written
	// file, and of two instances creating it at once, one id wins and both read it.
	tmp := InstanceIDFile + "." + id + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("creating %s: %w", path, err)
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = root.Link(tmp, InstanceIDFile)
	}
	root.Remove(tmp)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("creating %s: %w", path, err)
	}
	return readInstanceID(root, path)
}

// readInstanceID reads the id in InstanceIDFile, which is path.
func readInstanceID(root *os.Root, path string) (string, error) {
	b, err := root.ReadFile(InstanceIDFile)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !instanceIDPattern.MatchString(id) {
		return "", fmt.Errorf("the instance id in %s is damaged (want 1 to 64 letters, digits, '.', '_' or '-'): "+
			"write a valid one, or remove the file to give the instance a new id", path)
	}
	return id, nil
}

// Instance is one runtime instance as its heartbeats describe it. LastSeen is in Unix
// seconds, the time of its last heartbeat by the clock of the instance that wrote it.
type Instance struct {
	ID            string
	Address       string // where other instances and operators reach it
	Version       string // the runtime version
	AppliedChange int64  // the desired state's change number it has converged on
	LastSeen      int64
	Health        string
}

// instanceColumns are the columns of instances.
const instanceColumns = "id, address, version, applied_change, last_seen, health"

// Limits on an instance's fields.
const (
	maxInstanceAddress = 512
	maxInstanceText    = 1000
)

// Heartbeat records in as this instance's row, seen now. In sync mode the row is written to
// the primary (ErrPrimaryUnavailable while it is away) and to the replica; other instances
// read it after their next pull.
//
// Heartbeats take no change number: they are not desired state, nothing converges on them,
// and they come from every instance every interval. Numbered, they would keep the change
// number moving while nothing changes, so that every pull found something new and an
// instance's applied change could never be read against the latest; and each would take the
// counter row that serialises the writes on the primary. Each instance writes only its own
// row, so the last write wins without any order; pulls read the few rows whole instead.
func (s *Store) Heartbeat(ctx context.Context, in Instance) error {
	if !instanceIDPattern.MatchString(in.ID) {
		return inputErr("BAD_REQUEST", "instance id %q is not valid", in.ID)
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{{"instance address", in.Address, maxInstanceAddress}, {"instance version", in.Version, maxUnitVersion},
		{"instance health", in.Health, maxInstanceText}} {
		if err := checkText(f.name, "BAD_REQUEST", f.value, f.max); err != nil {
			return err
		}
	}
	in.LastSeen = s.now().Unix()
	const upsert = `INSERT INTO instances (` + instanceColumns + `) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version,
		applied_change = excluded.applied_change, last_seen = excluded.last_seen, health = excluded.health`
	args := []any{in.ID, in.Address, in.Version, in.AppliedChange, in.LastSeen, in.Health}
	if r := s.replica; r != nil {
		err := r.exchange(ctx, func(ctx context.Context) error {
			_, err := r.primary.ExecContext(ctx, upsert, args...)
			return err
		})
		if err != nil {
			return err
		}
	}
	if _, err := s.db.ExecContext(ctx, upsert, args...); err != nil {
		return fmt.Errorf("recording the heartbeat of instance %s: %w", in.ID, err)
	}
	return nil
}

// Instances returns every instance's last heartbeat as this instance holds it (in sync mode,
// as of its last pull, besides its own), by id.
func (s *Store) Instances(ctx context.Context) ([]Instance, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading the instances: %w", err)
	}
	defer rows.Close()
	out := []Instance{}
	for rows.Next() {
		var in Instance
		if err := rows.Scan(&in.ID, &in.Address, &in.Version, &in.AppliedChange, &in.LastSeen, &in.Health); err != nil {
			return nil, fmt.Errorf("reading the instances: %w", err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}
