package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Publisher is a desired state that takes new rows without replacing any; *keystore.Store is
// one.
type Publisher interface {
	Desired
	Add(ctx context.Context, u keystore.UnitVersion, by keystore.Principal) (int64, error)
}

// PublishOptions configure Publish.
type PublishOptions struct {
	Desired Publisher
	Store   packagestore.Store
	Workers *packages.Catalog
	Plugins *packages.Catalog
	// By is who the rows are written by: the root principal for the command.
	By keystore.Principal
	// DryRun packs and checks every tree (in temporary files it removes) and reports what
	// would be published; it writes nothing to the store, the desired state or the records.
	DryRun bool
}

// Published is what Publish did, or in a dry run would do. Each Unit carries the archive
// packed from its tree; Change is the row's.
type Published struct {
	Published []Unit // archive stored, row written, tree recorded
	// Recorded are trees whose row the desired state held already with the same archive (a
	// publish that stopped before it recorded them): only recorded.
	Recorded  []Unit
	Conflicts []Conflict
	Failed    []PublishFailure
}

// Conflict is a tree that was not published because the desired state holds another row for
// it: the same version from another archive, a removed version, or a plugin's other live
// version. It is left unrecorded, so this instance's reconciler reports it as Local (or
// replaces it with the row's, when the row is live and of the same version).
type Conflict struct {
	Unit
	Existing keystore.UnitVersion
}

// PublishFailure is a tree that could not be packed, checked, stored or recorded.
type PublishFailure struct {
	Unit
	Err error
}

// Publish publishes the uploaded trees of this instance that are no part of the cluster yet,
// so that a single instance grows into a cluster without uploading again: every version in
// the catalogs' writable folders that has no record (see record.go) is packed into an archive
// (packages.Pack), checked as an upload and as another instance's reconciler would (the
// archive must install as the same name and version within the catalog's limits), put in the
// store, given a live row enabled as its manifest says, and recorded, so this instance's next
// pass finds it converged and the others install the same tree. A row the desired state holds
// already is never replaced: a conflict, reported. Built-in folders stay local.
//
// Stop the instance first: its folders must not change meanwhile. Run again, Publish does
// nothing more; after an interruption, it completes what is left. The error is one that stops
// the whole (a catalog or the desired state cannot be read); a single tree fails on its own.
func Publish(ctx context.Context, o PublishOptions) (Published, error) {
	var out Published
	if o.Desired == nil || o.Store == nil || o.Workers == nil || o.Plugins == nil {
		return out, errors.New("publish: the desired state, the store and both catalogs are required")
	}
	rows, err := o.Desired.Versions(ctx)
	if err != nil {
		return out, fmt.Errorf("reading the desired state: %w", err)
	}
	p := publisher{o: o, out: &out, rows: map[key]keystore.UnitVersion{}, plugins: map[string]keystore.UnitVersion{}}
	for _, row := range rows {
		p.rows[key{row.Kind, row.Name, row.Version}] = row
		if row.Kind == keystore.UnitPlugin && row.Live() {
			p.plugins[row.Name] = row
		}
	}
	for _, kind := range []string{keystore.UnitWorker, keystore.UnitPlugin} {
		cat := o.Workers
		if kind == keystore.UnitPlugin {
			cat = o.Plugins
		}
		if err := p.catalog(ctx, kind, cat); err != nil {
			return out, err
		}
	}
	for _, list := range [][]Unit{out.Published, out.Recorded} {
		slices.SortFunc(list, compareUnits)
	}
	return out, ctx.Err()
}

// publisher is the state of one Publish.
type publisher struct {
	o       PublishOptions
	out     *Published
	rows    map[key]keystore.UnitVersion
	plugins map[string]keystore.UnitVersion // each plugin's live row
	// storeDown is the first failure of a put that no other put gets past (the store
	// unreachable, the credentials or the bucket refused): the others are not tried.
	storeDown error
}

// catalog publishes the unrecorded trees of one catalog's writable folders.
func (p *publisher) catalog(ctx context.Context, kind string, cat *packages.Catalog) error {
	layout := cat.Layout()
	units, err := cat.List()
	if err != nil {
		return fmt.Errorf("listing the installed %ss: %w", layout.Noun, err)
	}
	records := map[string]map[string]string{}
	for _, d := range cat.Dirs() {
		if d.BuiltIn {
			continue
		}
		err := withRoot(d.Path, func(root *os.Root) (err error) {
			records[d.Path], err = readRecords(root, layout)
			return err
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
	}
	for _, u := range units {
		if u.Dir.BuiltIn {
			continue
		}
		for _, v := range u.Versions {
			if ctx.Err() != nil {
				return nil
			}
			rel := layout.RelPath(u.Name, v.Version)
			if _, ok := records[u.Dir.Path][rel]; ok {
				continue // installed from the store, or published already
			}
			unit := Unit{Kind: kind, Name: u.Name, Version: v.Version, Path: v.Path}
			if err := p.tree(ctx, cat, u.Dir, v, unit); err != nil {
				p.out.Failed = append(p.out.Failed, PublishFailure{Unit: unit, Err: err})
			}
		}
	}
	return nil
}

// tree publishes one tree.
func (p *publisher) tree(ctx context.Context, cat *packages.Catalog, dir packages.Dir, v packages.Version, u Unit) error {
	archive, err := os.CreateTemp(dir.Path, packages.TempPrefix+"publish-*.tgz")
	if err != nil {
		return fmt.Errorf("packing %s: %w", u.Path, err)
	}
	defer func() {
		archive.Close()
		os.Remove(archive.Name())
	}()
	h := sha256.New()
	err = withRoot(v.Path, func(root *os.Root) error {
		_, err := packages.Pack(root, io.MultiWriter(archive, h), packages.PackOptions{})
		return err
	})
	if err != nil {
		return err
	}
	size, err := archive.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	u.SHA256 = hex.EncodeToString(h.Sum(nil))

	// Checked as the other instances will check it before they install it.
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return err
	}
	s, err := cat.Stage("packed.tgz", archive, func(md packages.Metadata) error {
		if md.Name != u.Name || md.Version != u.Version {
			return fmt.Errorf("the packed tree holds %s@%s, not %s@%s", md.Name, md.Version, u.Name, u.Version)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the packed tree does not install again: %w", err)
	}
	s.Discard()

	row := keystore.UnitVersion{UnitRef: keystore.UnitRef{Kind: u.Kind, Name: u.Name, Version: u.Version},
		SHA256: u.SHA256, Size: size, Enabled: v.Enabled}
	if existing, ok := p.conflict(row); ok {
		p.found(u, row, existing, dir, cat.Layout())
		return nil
	}
	if p.o.DryRun {
		p.out.Published = append(p.out.Published, u)
		return nil
	}
	if p.storeDown != nil {
		return fmt.Errorf("not tried after an earlier put failed: %w", p.storeDown)
	}
	sum, _ := packagestore.ParseSum(u.SHA256)
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := p.o.Store.Put(ctx, sum, size, archive); err != nil {
		if errors.Is(err, packagestore.ErrUnavailable) || errors.Is(err, packagestore.ErrDenied) || errors.Is(err, packagestore.ErrNoBucket) {
			p.storeDown = err
		}
		return err
	}
	change, err := p.o.Desired.Add(ctx, row, p.o.By)
	var exists *keystore.UnitExistsError
	if errors.As(err, &exists) {
		p.found(u, row, exists.Existing, dir, cat.Layout())
		return nil
	}
	if err != nil {
		return err
	}
	u.Change = change
	if err := recordTree(dir, cat.Layout(), u); err != nil {
		return err
	}
	p.out.Published = append(p.out.Published, u)
	return nil
}

// conflict returns the row that stands in the way of row, as the desired state read at the
// start holds it: a row of the same version, or a plugin's other live version.
func (p *publisher) conflict(row keystore.UnitVersion) (keystore.UnitVersion, bool) {
	if existing, ok := p.rows[key{row.Kind, row.Name, row.Version}]; ok {
		return existing, true
	}
	if row.Kind == keystore.UnitPlugin {
		existing, ok := p.plugins[row.Name]
		return existing, ok
	}
	return keystore.UnitVersion{}, false
}

// found handles a row the desired state holds for the tree: the same archive of the same
// version, live, is this tree published before it was recorded, and is recorded now; any
// other row is a conflict.
func (p *publisher) found(u Unit, row, existing keystore.UnitVersion, dir packages.Dir, layout packages.Layout) {
	if !existing.Live() || existing.Version != row.Version || existing.SHA256 != row.SHA256 {
		p.out.Conflicts = append(p.out.Conflicts, Conflict{Unit: u, Existing: existing})
		return
	}
	u.Change = existing.Change
	if !p.o.DryRun {
		if err := recordTree(dir, layout, u); err != nil {
			p.out.Failed = append(p.out.Failed, PublishFailure{Unit: u, Err: err})
			return
		}
	}
	p.out.Recorded = append(p.out.Recorded, u)
}

// recordTree records the tree of u in its catalog folder as installed from its archive.
func recordTree(dir packages.Dir, layout packages.Layout, u Unit) error {
	return withRoot(dir.Path, func(root *os.Root) error {
		return writeRecord(root, layout.RelPath(u.Name, u.Version), u.SHA256)
	})
}
