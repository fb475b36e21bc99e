package packages

import (
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/caddy-runtime/runtime/internal/mount"
)

// Latest is the version of a package that declares none; it sorts above every semver.
const Latest = "latest"

// MaxNameLength is npm's limit on package names.
const MaxNameLength = 214

var namePattern = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)

// ValidateName checks a package name against npm's rules: lower case, optionally scoped as
// @scope/name. Only names that pass ever reach a path.
func ValidateName(name string) error {
	if name == "" {
		return newErr(Invalid, CodeMissingName, "the package has no name; set name in manifest.yaml or package.json")
	}
	if len(name) > MaxNameLength || !namePattern.MatchString(name) {
		return newErr(Invalid, CodeInvalidName,
			"package name %q is not valid: use lower-case letters, digits, '.', '_' and '-', optionally scoped as @scope/name, at most %d characters", name, MaxNameLength)
	}
	return nil
}

// ValidateVersion checks a version: "latest" or a semver such as 1.2.3 or 2.0.0-beta.1.
func ValidateVersion(v string) error {
	if v == Latest {
		return nil
	}
	if len(v) > 128 {
		return newErr(Invalid, CodeInvalidVersion, "package version is longer than 128 characters")
	}
	if _, err := semver.StrictNewVersion(v); err != nil {
		return newErr(Invalid, CodeInvalidVersion, "package version %q is not valid: use latest or a semver such as 1.2.3", v)
	}
	return nil
}

// ReservedNames are the first path segments the runtime keeps for itself under apiPrefix:
// mount.APISegment, mount.CPanelSegment, mount.WellKnownSegment and the first segment of the
// API path. Names
// starting with '.' or '_' are reserved too (see IsReserved). This is the one list of them.
func ReservedNames(apiPrefix string) []string {
	first, _, _ := strings.Cut(strings.TrimPrefix(apiPrefix, "/"), "/")
	names := []string{mount.APISegment, mount.CPanelSegment, mount.WellKnownSegment}
	if first != "" && !slices.Contains(names, first) {
		names = append(names, first)
	}
	return names
}

// IsReserved reports whether segment, the first path segment of a worker or plugin, is
// one the runtime keeps: one of reserved, or any name starting with '.' or '_'.
func IsReserved(segment string, reserved []string) bool {
	return strings.HasPrefix(segment, ".") || strings.HasPrefix(segment, "_") || slices.Contains(reserved, segment)
}

// CheckReserved refuses a unit name whose URL would be one of the runtime's own paths. A
// scoped name's first segment is its @scope, which is never reserved.
func CheckReserved(name string, reserved []string) error {
	if _, base := SplitName(name); IsReserved(name, reserved) || IsReserved(base, nil) {
		return newErr(Invalid, CodeInvalidName, "%q is reserved by the runtime (/%s/ is its own path, and names starting with '.' or '_' are kept); choose another name", name, name)
	}
	return nil
}

// SplitName splits "@scope/name" into "@scope" and "name"; an unscoped name has scope "".
func SplitName(name string) (scope, base string) {
	if s, b, ok := strings.Cut(name, "/"); ok && strings.HasPrefix(name, "@") {
		return s, b
	}
	return "", name
}

// JoinName is the inverse of SplitName, accepting the API's "_" for no scope.
func JoinName(scope, base string) string {
	if scope == "" || scope == "_" {
		return base
	}
	return scope + "/" + base
}

// CompareVersions orders versions: semvers by precedence, "latest" above all, and anything
// unparsable (never installed by the runtime) below all, by string.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	if a == Latest {
		return 1
	}
	if b == Latest {
		return -1
	}
	va, ea := semver.StrictNewVersion(a)
	vb, eb := semver.StrictNewVersion(b)
	switch {
	case ea == nil && eb == nil:
		if c := va.Compare(vb); c != 0 {
			return c
		}
		return strings.Compare(a, b) // equal precedence, different build metadata
	case ea == nil:
		return 1
	case eb == nil:
		return -1
	}
	return strings.Compare(a, b)
}

// SortVersions sorts versions in ascending order.
func SortVersions(vs []string) { slices.SortFunc(vs, CompareVersions) }
