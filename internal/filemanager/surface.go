// Package filemanager browses and edits the files of workers and plugins under their catalog
// folders ("roots"), with the path policy of each surface:
//
//   - A virtual path is "<root folder name>/<path inside it>"; "" names the list of roots.
//   - Workers keep one folder per version (<name>/<version>/ or @scope/<name>/<version>/); files
//     are written only strictly inside a version folder, so the file manager never creates,
//     renames, moves or deletes a name, scope or version folder (versions come from uploads).
//   - Plugins keep one folder per unit (<name>/ or @scope/<name>/); anything strictly inside it
//     is writable, the unit folder itself is not.
//   - Built-in roots (folder name starting with ".") are read-only.
//   - Every path is checked against the caller's namespaces through a Guard, sources and
//     destinations alike.
//
// Containment does not rest on string checks alone: after the syntax checks, every access goes
// through an os.Root opened at the unit folder (reads) or at the writable folder (writes), so a
// symbolic link can lead neither outside its root nor into another unit. Links are listed as
// entries and may be renamed, moved or deleted (which acts on the link itself), but are never
// followed outside that folder.
//
// The package knows nothing of HTTP: operations return *packages.Error values whose Kind and
// Code the API maps to statuses.
package filemanager

import (
	"path"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// Guard decides whether the caller may reach a unit ("@team/app", "app") or a scope folder
// ("@team"); it returns nil when it may, else the error to answer with.
type Guard func(unit string) error

// Surface is the file manager of one kind of unit: its layout, its roots and whom to tell
// about changes.
type Surface struct {
	layout   packages.Layout
	roots    []root
	onChange func(packages.Change)
	admit    Admit // nil: metadata writes are not admitted
	frozen   error // refuses every write the policy allows; nil: none
}

// WithFrozen makes s refuse with err every write that built-in roots and the path policy
// would let through (reads go on), and returns s: in cluster mode, uploaded units are served
// by every instance as uploaded.
func (s *Surface) WithFrozen(err error) *Surface {
	s.frozen = err
	return s
}

// root is one catalog folder as the file manager shows it.
type root struct {
	name string // the folder's base name, the first element of virtual paths
	dir  packages.Dir
}

// New returns the file manager of the catalog folders dirs (in catalog order) with layout;
// onChange, when set, is called after every successful write with Op "files". Two folders
// with the same base name cannot both be shown: the first wins, as it does in the catalog.
func New(layout packages.Layout, dirs []packages.Dir, onChange func(packages.Change)) *Surface {
	s := &Surface{layout: layout, onChange: onChange}
	seen := map[string]bool{}
	for _, d := range dirs {
		name := path.Base(strings.ReplaceAll(d.Path, `\`, "/"))
		if seen[name] || name == "." || name == "/" {
			continue
		}
		seen[name] = true
		s.roots = append(s.roots, root{name: name, dir: d})
	}
	return s
}

// ForCatalog returns the file manager of a catalog, telling it about every change so its
// cached scans drop and the runtime reacts.
func ForCatalog(c *packages.Catalog) *Surface {
	return New(c.Layout(), c.Dirs(), c.Changed)
}

// Level is how deep a virtual path reaches into a root's layout.
type Level int

// Levels of a virtual path, from the list of roots down.
const (
	LevelRoots   Level = iota // "": the list of roots
	LevelRoot                 // "apps"
	LevelScope                // "apps/@team"
	LevelUnit                 // "apps/@team/app" or "apps/app"
	LevelVersion              // "apps/app/1.0.0", versioned layout only
	LevelInside               // below the version folder (workers) or the unit folder (plugins)
)

// Location is a parsed virtual path.
type Location struct {
	Path    string // the cleaned virtual path
	Level   Level
	Scope   string // "@team" on scoped paths
	Unit    string // the unit's name ("@team/app"); "" above the unit level
	Version string // versioned layout: the version element; "" above it
	// Inner is the path below the writable folder (the version folder of a worker, the unit
	// folder of a plugin); "" at or above it.
	Inner string

	root int    // index into Surface.roots
	rel  string // the path inside the root folder; "" for the root itself
}

// tempPrefix starts the names of the staging folders of uploads, at the top of a root. It is
// the catalog's own prefix, so the catalog's start-up clean-up removes what a crash left.
const tempPrefix = packages.TempPrefix

// internalPrefix starts the names the runtime keeps for itself at the top of a root (staging
// folders, the reconciler's records): never listed, never reached.
const internalPrefix = packages.InternalPrefix

// maxPathLength bounds virtual paths and names.
const maxPathLength = 4096

// Resolve parses a virtual path. It refuses ".." elements, absolute paths, backslashes and NUL
// bytes (PATH_TRAVERSAL), empty or "." elements (BAD_REQUEST) and unknown roots
// (FILE_NOT_FOUND); it does not touch the disk.
func (s *Surface) Resolve(vpath string) (Location, error) {
	clean, err := cleanPath(vpath, "path")
	if err != nil {
		return Location{}, err
	}
	if clean == "" {
		return Location{Level: LevelRoots, root: -1}, nil
	}
	parts := strings.Split(clean, "/")
	loc := Location{Path: clean, Level: LevelRoot, root: -1, rel: strings.Join(parts[1:], "/")}
	for i, r := range s.roots {
		if r.name == parts[0] {
			loc.root = i
			break
		}
	}
	if loc.root < 0 {
		return Location{}, notFound("%q is not a %s folder; list path \"\" for the folders", parts[0], s.layout.Noun)
	}
	rest := parts[1:]
	if len(rest) == 0 {
		return loc, nil
	}
	if strings.HasPrefix(rest[0], internalPrefix) {
		// Staging folders of uploads in progress and the reconciler's records are internal.
		return Location{}, notFound("%s does not exist", clean)
	}
	if strings.HasPrefix(rest[0], "@") {
		loc.Scope = rest[0]
		if len(rest) == 1 {
			loc.Level = LevelScope
			return loc, nil
		}
		loc.Unit, rest = rest[0]+"/"+rest[1], rest[2:]
	} else {
		loc.Unit, rest = rest[0], rest[1:]
	}
	loc.Level = LevelUnit
	if s.layout.Versioned && len(rest) > 0 {
		loc.Version, rest = rest[0], rest[1:]
		loc.Level = LevelVersion
	}
	if len(rest) > 0 {
		loc.Level = LevelInside
		loc.Inner = strings.Join(rest, "/")
	}
	return loc, nil
}

// cleanPath checks the syntax of a virtual path (what names it in messages) and returns it
// without a trailing slash.
func cleanPath(p, what string) (string, error) {
	hint := ""
	if what == "path" {
		hint = ", starting with a root folder's name (list path \"\" for them)"
	}
	if len(p) > maxPathLength {
		return "", badRequest("%s is longer than %d bytes", what, maxPathLength)
	}
	switch {
	case strings.ContainsRune(p, 0):
		return "", traversal("%s contains a NUL byte", what)
	case strings.Contains(p, `\`):
		return "", traversal("%s %q contains a backslash; paths use '/'", what, p)
	case strings.HasPrefix(p, "/") || hasDrive(p):
		return "", traversal("%s %q is absolute; it must be relative%s", what, p, hint)
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	for _, elem := range strings.Split(p, "/") {
		switch elem {
		case "..":
			return "", traversal("%s %q contains '..'; it must stay inside its folder%s", what, p, hint)
		case "", ".":
			return "", badRequest("%s %q has an empty or '.' element", what, p)
		}
	}
	return p, nil
}

// hasDrive reports a Windows drive prefix ("C:"), which is absolute for some clients.
func hasDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && (p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z')
}

// validName checks a single file or folder name, as given to rename.
func validName(name string) error {
	switch {
	case name == "":
		return badRequest("newName is empty")
	case name == "." || name == "..":
		return traversal("newName %q is not a file name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return traversal("newName %q must be a single name, without '/', '\\' or NUL", name)
	case len(name) > 255:
		return badRequest("newName is longer than 255 bytes")
	case strings.HasPrefix(name, tempPrefix):
		return badRequest("names starting with %s are reserved", tempPrefix)
	}
	return nil
}

// writeLevel is the level of the folder inside which files may be written.
func (s *Surface) writeLevel() Level {
	if s.layout.Versioned {
		return LevelVersion
	}
	return LevelUnit
}

// authorize asks the guard about the unit (or scope folder) a location lies in.
func (s *Surface) authorize(g Guard, loc Location) error {
	switch {
	case loc.Level < LevelScope || g == nil:
		return nil
	case loc.Unit != "":
		return g(loc.Unit)
	}
	return g(loc.Scope)
}

// checkWrite applies the write policy: loc is the thing written (a file or folder created,
// deleted, renamed or moved) when folder is false, or the folder something is written into
// when folder is true.
func (s *Surface) checkWrite(loc Location, folder bool) error {
	if loc.Level == LevelRoots {
		return forbidden("the list of %s folders cannot be changed", s.layout.Noun)
	}
	r := s.roots[loc.root]
	if r.dir.BuiltIn {
		return &packages.Error{Kind: packages.Forbidden, Code: CodeReadOnly, Message: "folder " + r.name +
			" is built-in (its name starts with '.') and read-only; change files in an uploaded folder"}
	}
	min := LevelInside
	if folder {
		min = s.writeLevel()
	}
	if loc.Level < min {
		return forbidden("%s", s.policyMessage(loc))
	}
	if packages.ValidateName(loc.Unit) != nil {
		return forbidden("%q is not a valid %s name, so %s is not inside a %s folder", loc.Unit, s.layout.Noun, loc.Path, s.layout.Noun)
	}
	if s.layout.Versioned && packages.ValidateVersion(loc.Version) != nil {
		return forbidden("%q is not a version (latest or a semver), so %s is not inside a version folder", loc.Version, loc.Path)
	}
	return s.frozen
}

// policyMessage explains why a location above the writable level cannot be written.
func (s *Surface) policyMessage(loc Location) string {
	what := map[Level]string{LevelRoot: "a root folder", LevelScope: "a scope folder",
		LevelUnit: "a " + s.layout.Noun + " folder", LevelVersion: "a version folder"}[loc.Level]
	if s.layout.Versioned {
		return loc.Path + " is " + what + "; worker files change only inside a version folder " +
			"(<name>/<version>/… or @scope/<name>/<version>/…). Versions are added by uploading a package " +
			"and removed with DELETE workers/{scope}/{name}/{version}"
	}
	return loc.Path + " is " + what + "; plugin files change only inside a plugin folder " +
		"(<name>/… or @scope/<name>/…). Plugins are added by uploading a package and removed with DELETE plugins/{name}"
}

// resolveWrite resolves a path that is about to be written and applies the guard and the
// write policy.
func (s *Surface) resolveWrite(g Guard, vpath string, folder bool) (Location, error) {
	loc, err := s.Resolve(vpath)
	if err != nil {
		return loc, err
	}
	if err := s.authorize(g, loc); err != nil {
		return loc, err
	}
	return loc, s.checkWrite(loc, folder)
}

// resolveRead resolves a path that is about to be read and applies the guard.
func (s *Surface) resolveRead(g Guard, vpath string) (Location, error) {
	loc, err := s.Resolve(vpath)
	if err != nil {
		return loc, err
	}
	return loc, s.authorize(g, loc)
}

// changed tells the catalog that a unit's files changed.
func (s *Surface) changed(loc Location) {
	if s.onChange != nil && loc.Unit != "" {
		s.onChange(packages.Change{Op: packages.OpFiles, Name: loc.Unit, Version: loc.Version})
	}
}

// join appends elements to a virtual path.
func join(base string, elem ...string) string {
	if base == "" {
		return path.Join(elem...)
	}
	return path.Join(append([]string{base}, elem...)...)
}
