package keystore

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// InputError is a refused key request; Code is the API error code.
type InputError struct {
	Code    string
	Message string
}

func (e *InputError) Error() string { return e.Message }

func inputErr(code, format string, args ...any) *InputError {
	return &InputError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Limits on key fields.
const (
	MaxNameLength        = 100
	MaxDescriptionLength = 500
	MaxNamespaces        = 100
)

// ExpiresInChoices are the lifetimes forms offer; ParseExpiresIn accepts more.
var ExpiresInChoices = []string{"never", "30d", "90d", "1y"}

var expiresInPattern = regexp.MustCompile(`^([1-9][0-9]{0,4})([dwmy])$`)

var expiresInDays = map[string]int64{"d": 1, "w": 7, "m": 30, "y": 365}

// maxLifetimeDays bounds a key's lifetime at 100 years.
const maxLifetimeDays = 100 * 365

// ParseExpiresIn turns "never" (or "") into 0 and "<n>d|w|m|y" (m = 30 days, y = 365 days)
// into the Unix second at which a key created at now expires.
func ParseExpiresIn(s string, now time.Time) (int64, error) {
	if s == "" || s == "never" {
		return 0, nil
	}
	m := expiresInPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, inputErr("INVALID_EXPIRATION", "expiresIn %q is not valid; use never or a number with d, w, m (30 days) or y, e.g. 30d, 2w, 6m, 1y", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	days := n * expiresInDays[m[2]]
	if days > maxLifetimeDays {
		return 0, inputErr("INVALID_EXPIRATION", "expiresIn %q is longer than 100 years; use never for a key that does not expire", s)
	}
	return now.Unix() + days*86400, nil
}

var namespacePattern = regexp.MustCompile(`^@[a-z0-9][a-z0-9._-]*$`)

// NormalizeNamespaces validates a namespace list and removes duplicates: either ["*"] or
// @scope names (npm scope rules, at most 214 characters).
func NormalizeNamespaces(list []string) ([]string, error) {
	if len(list) == 0 {
		return nil, inputErr("INVALID_NAMESPACE", `namespaces must not be empty; use ["*"] for full access or @scope names`)
	}
	if len(list) > MaxNamespaces {
		return nil, inputErr("INVALID_NAMESPACE", "at most %d namespaces per key", MaxNamespaces)
	}
	out := make([]string, 0, len(list))
	for _, ns := range list {
		switch {
		case ns == AllNamespaces:
			if len(list) > 1 {
				return nil, inputErr("INVALID_NAMESPACE", `"*" grants every namespace and cannot be combined with others`)
			}
		case len(ns) > 214 || !namespacePattern.MatchString(ns):
			return nil, inputErr("INVALID_NAMESPACE", "namespace %q is not valid; use @scope (lower-case letters, digits, '.', '_', '-') or \"*\"", ns)
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// NormalizePermissions validates the permissions of a custom key.
func NormalizePermissions(list []string) ([]string, error) {
	if len(list) == 0 {
		return nil, inputErr("MISSING_PERMISSIONS", "role custom needs at least one permission; see GET keys/meta for the list")
	}
	out := make([]string, 0, len(list))
	for _, p := range list {
		if !KnownPermission(p) {
			return nil, inputErr("INVALID_PERMISSION", "unknown permission %q; known: %s", p, strings.Join(AllPermissions, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// checkText validates a name or description: valid UTF-8, bounded, printable. U+FFFD is
// refused as well: it is what a JSON decoder makes of invalid UTF-8, and a name that lost its
// characters that way would be stored unlike it was sent.
func checkText(field, code, s string, maxLen int) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		return inputErr(code, "%s is not valid UTF-8 (or holds U+FFFD, the replacement for invalid bytes); send it as UTF-8 text", field)
	}
	if utf8.RuneCountInString(s) > maxLen {
		return inputErr(code, "%s is longer than %d characters", field, maxLen)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return inputErr(code, "%s contains a control or invisible formatting character (%U); use printable characters only", field, r)
		}
	}
	return nil
}
