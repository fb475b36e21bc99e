package serving

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/packages"
)

// VersionHeader names the worker version on every answer a worker gives, so the two sides of
// a traffic split can be told apart.
const VersionHeader = "X-Worker-Version"

// VisitorCookie keeps a visitor's random id on the workers' origin: hashed with a worker's
// name it is the visitor's bucket, so the visitor gets one version of a split worker on every
// instance without any state kept on the server.
const VisitorCookie = "runtime_visitor"

// visitorMaxAge is how long the visitor cookie lives, in seconds: a year.
const visitorMaxAge = "31536000"

// Buckets is the number of buckets visitors are hashed into: one per percent of a split.
const Buckets = 100

// Share is one version's part of a traffic split.
type Share struct {
	Version string
	Percent int
}

// Split is the split of one worker's unpinned requests between its versions: the newest
// version takes the lowest buckets, the next newest the following ones, and so on. Growing a
// version's share at the expense of its neighbour's (the two sides of a canary) moves only
// visitors of the neighbour's bucket range, never one of its own away.
type Split struct {
	versions []string
	upto     []int // versions[i] serves the buckets below upto[i] and from upto[i-1]
}

// NewSplit returns the split of shares (each named once, summing to 100), ordered newest
// version first.
func NewSplit(shares []Share) *Split {
	shares = slices.Clone(shares)
	slices.SortFunc(shares, func(a, b Share) int { return packages.CompareVersions(b.Version, a.Version) })
	sp := &Split{}
	sum := 0
	for _, sh := range shares {
		sum += sh.Percent
		sp.versions = append(sp.versions, sh.Version)
		sp.upto = append(sp.upto, sum*Buckets/100)
	}
	return sp
}

// Version returns the version of the split that serves bucket, "" when none (shares summing
// to less than 100).
func (sp *Split) Version(bucket int) string {
	for i, upto := range sp.upto {
		if bucket < upto {
			return sp.versions[i]
		}
	}
	return ""
}

// Splits holds the traffic splits in force, by worker name. Readers take no lock: the map is
// immutable and swapped whole when the splits change, which is rare.
type Splits struct {
	m atomic.Pointer[map[string]*Split]
}

// NewSplits returns an empty set of splits.
func NewSplits() *Splits {
	s := &Splits{}
	s.m.Store(&map[string]*Split{})
	return s
}

// Replace puts splits (by worker name) in force in place of every split before.
func (s *Splits) Replace(splits map[string][]Share) {
	m := make(map[string]*Split, len(splits))
	for name, shares := range splits {
		if len(shares) > 0 {
			m[name] = NewSplit(shares)
		}
	}
	s.m.Store(&m)
}

// Get returns the split of the worker name, nil when none is in force.
func (s *Splits) Get(name string) *Split {
	if s == nil {
		return nil
	}
	return (*s.m.Load())[name]
}

// Bucket hashes a visitor id with a worker's name into a bucket from 0 to Buckets-1: the
// same on every instance and every run (FNV-1a, then a finaliser that spreads its low bits),
// different per worker, so one visitor is not on the canary side of every split at once.
func Bucket(visitor, worker string) int {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(visitor); i++ {
		h = (h ^ uint64(visitor[i])) * prime
	}
	h = (h ^ 0) * prime // a separator: ("ab","c") and ("a","bc") differ
	for i := 0; i < len(worker); i++ {
		h = (h ^ uint64(worker[i])) * prime
	}
	// splitmix64's finaliser
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int(h % Buckets)
}

// visit is what choosing a side of a split learned of the request: whether the worker has a
// split, and a new visitor id to set as the cookie.
type visit struct {
	split bool
	newID string
}

// splitChoice is the first choice for an unpinned request: the version of u's split that
// serves the request's visitor, when u has a split and that version is enabled here. A
// version of the split this instance does not hold enabled (not installed yet, disabled since)
// leaves its visitors to the choices after it.
func (s *Server) splitChoice(u packages.Unit, r *http.Request, vi *visit) (packages.Version, bool) {
	sp := s.opts.Splits.Get(u.Name)
	if sp == nil {
		return packages.Version{}, false
	}
	vi.split = true
	want := sp.Version(Bucket(s.visitor(r, vi), u.Name))
	for i := len(u.Versions) - 1; i >= 0; i-- {
		if v := u.Versions[i]; v.Version == want {
			return v, v.Enabled
		}
	}
	return packages.Version{}, false
}

// visitor returns the id a request is split by: its visitor cookie; without one, the value
// of the header the operator named (SplitHeader); else a new random id, which vi takes to be
// set as the cookie, so a browser stays on its side from its next request on.
func (s *Server) visitor(r *http.Request, vi *visit) string {
	if vi.newID != "" {
		return vi.newID
	}
	if id, ok := visitorCookie(r.Header); ok {
		return id
	}
	if s.opts.SplitHeader != "" {
		if v := r.Header.Get(s.opts.SplitHeader); v != "" {
			return v
		}
	}
	vi.newID = newVisitorID()
	return vi.newID
}

// visitorCookie reads the visitor cookie from h without parsing the other cookies. A value
// that is not one the runtime sets counts as none.
func visitorCookie(h http.Header) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var pair string
			pair, line, _ = strings.Cut(line, ";")
			name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && name == VisitorCookie && validVisitorID(value) {
				return value, true
			}
		}
	}
	return "", false
}

// validVisitorID accepts what newVisitorID makes: base64url text of a sane length.
func validVisitorID(v string) bool {
	if len(v) < 8 || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// newVisitorID returns 16 random bytes as base64url text.
func newVisitorID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// splitAnswer marks the answer of a split worker: it varies with the visitor cookie (and the
// split header), so no shared cache hands one visitor's version to another; a new visitor
// gets its cookie.
func (s *Server) splitAnswer(w http.ResponseWriter, r *http.Request, vi *visit) {
	if !vi.split {
		return
	}
	h := w.Header()
	h.Add("Vary", "Cookie")
	if s.opts.SplitHeader != "" {
		h.Add("Vary", s.opts.SplitHeader)
	}
	if vi.newID != "" {
		setVisitorCookie(w, r, vi.newID)
	}
}

// setVisitorCookie sets the visitor cookie with id on the answer: for the whole origin, for a
// year, out of reach of scripts; Secure when the request came over HTTPS.
func setVisitorCookie(w http.ResponseWriter, r *http.Request, id string) {
	c := VisitorCookie + "=" + id + "; Path=/; Max-Age=" + visitorMaxAge + "; HttpOnly; SameSite=Lax"
	if trace.HTTPS(r) {
		c += "; Secure"
	}
	w.Header().Add("Set-Cookie", c)
}
