package handlers

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/caddy-runtime/runtime/internal/cork"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/keystore"
)

// maxCachedBodies bounds the listings a bodyCache keeps for one generation (one per set of
// namespaces that asked). Each keeps the pages asked of it while they hold no more than
// pageBudget times the whole listing's bytes (plus minPageBudget, for small listings): enough
// for walks at a page size or two, however many cursors and limits clients try.
const (
	maxCachedBodies = 64
	pageBudget      = 2
	minPageBudget   = 64 << 10
)

// Bounds of a listing page, as the audit route has them.
const (
	defaultPageLimit = 50
	maxPageLimit     = 500
)

// NextCursorHeader carries the cursor of a listing's next page; absent on the last page and
// on answers that were not asked for a page.
const NextCursorHeader = "X-Next-Cursor"

// bodyCache keeps the answers of a listing for the generation of its source, one listing per
// set of namespaces the callers may see: a listing that has not changed is answered with a
// copy instead of building and encoding it again, whole or in pages, in either encoding.
type bodyCache struct {
	mu    sync.Mutex
	gen   cacheGen
	lists map[string]*listing
}

// listRecord is one record of a listing, with the key pages are cut along: records come in
// pages in ascending byte order of their keys, which are unique within a listing.
type listRecord struct {
	order string
	value any
}

// listShape is how a listing's records make an answer, and how it is cut into pages.
type listShape struct {
	// wrap returns the answer holding records, the comma-separated encoded records, with next,
	// the cursor of the page after them ("" when none or when the answer is not a page).
	wrap func(records []byte, next string) []byte
	// after returns the order key a client's cursor names (records after it come next), false
	// when it is malformed; nil when the listing is not paged.
	after func(cursor string) (string, bool)
	// cursor returns the cursor naming a record's order key.
	cursor func(order string) string
}

// arrayShape is a listing answered as a JSON array of its records.
var arrayShape = listShape{wrap: func(records []byte, _ string) []byte {
	return slices.Concat([]byte("["), records, []byte("]\n"))
}}

// listing is the answer of a listing for one generation and set of namespaces: the whole
// answer, and its records one by one for pages.
type listing struct {
	whole     *envelope.Body
	items     [][]byte // the encoded records, by order key
	orders    []string // their order keys, ascending
	pages     map[pageQuery]*page
	pageBytes int // the bytes of the kept pages
	budget    int // the most pageBytes may reach
}

// pageQuery is the page a request asks for: limit records after the order key after.
type pageQuery struct {
	after string
	limit int
}

// page is one page's answer and the cursor of the next page.
type page struct {
	body *envelope.Body
	raw  []byte // body's identity form, for the budget
	next string
}

// pageParams documents the query parameters of a paged listing; the cursor's form is the
// listing's own.
func pageParams(cursorForm string) []openapi.Parameter {
	str := &openapi.Schema{Type: "string"}
	return []openapi.Parameter{
		{Name: "limit", In: "query", Description: "records per page, 1 to 500 (default 50 when cursor is given); " +
			"without limit and cursor the answer is the whole listing, unpaginated", Schema: &openapi.Schema{Type: "integer"}},
		{Name: "cursor", In: "query", Description: "the " + NextCursorHeader + " of the previous page (" + cursorForm + "); pages come " +
			"in that order, so a record present throughout a walk is on exactly one page however others come and go", Schema: str},
	}
}

// nextCursorHeaders documents the header naming the next page.
var nextCursorHeaders = map[string]openapi.Header{NextCursorHeader: {
	Description: "the cursor of the next page, to pass as cursor; only on a page (limit or cursor given) that is not the last",
	Schema:      &openapi.Schema{Type: "string"},
}}

// query reads the page r asks for; paged is false when it gives neither limit nor cursor (or
// the listing is not paged), which asks for the whole listing.
func (s listShape) query(r *http.Request) (q pageQuery, paged bool, err error) {
	if s.after == nil {
		return q, false, nil
	}
	values := r.URL.Query()
	limit, cursor := values.Get("limit"), values.Get("cursor")
	if limit == "" && cursor == "" {
		return q, false, nil
	}
	bad := func(name, value, why string) error {
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "query parameter %s is %q; %s", name, value, why)
	}
	q.limit = defaultPageLimit
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > maxPageLimit {
			return q, false, bad("limit", limit, "use a number from 1 to 500")
		}
		q.limit = n
	}
	if cursor != "" {
		var ok bool
		if q.after, ok = s.after(cursor); !ok {
			return q, false, bad("cursor", cursor, "pass the "+NextCursorHeader+" of the previous page")
		}
	}
	return q, true, nil
}

// serve answers with the listing for gen and the namespaces of p, whole or the page r asks
// for, building it with build when it is not kept; cacheable false (the source could not name
// its generation) always builds.
func (c *bodyCache) serve(w http.ResponseWriter, r *http.Request, p keystore.Principal, gen cacheGen, cacheable bool,
	shape listShape, build func() ([]listRecord, error)) error {
	q, paged, err := shape.query(r)
	if err != nil {
		return err
	}
	key := "*"
	if !p.Unrestricted() {
		key = strings.Join(p.Namespaces, "\x00")
	}
	var l *listing
	if cacheable {
		c.mu.Lock()
		if c.gen == gen {
			l = c.lists[key]
		}
		c.mu.Unlock()
	}
	if l == nil {
		records, err := build()
		if err != nil {
			return err
		}
		l = newListing(records, shape)
		if cacheable {
			c.mu.Lock()
			if c.gen != gen || c.lists == nil || len(c.lists) >= maxCachedBodies {
				c.gen, c.lists = gen, map[string]*listing{}
			}
			c.lists[key] = l
			c.mu.Unlock()
		}
	}
	if !paged {
		writeBody(w, r, l.whole)
		return nil
	}
	c.mu.Lock()
	pg := l.pages[q]
	c.mu.Unlock()
	if pg == nil {
		pg = l.page(q, shape)
		size := len(pg.raw)
		c.mu.Lock()
		if l.pageBytes+size > l.budget {
			clear(l.pages)
			l.pageBytes = 0
		}
		l.pages[q] = pg
		l.pageBytes += size
		c.mu.Unlock()
	}
	if pg.next != "" {
		w.Header().Set(NextCursorHeader, pg.next)
	}
	writeBody(w, r, pg.body)
	return nil
}

// cacheGen names what a kept listing was built from: the generation of its records, and of
// other state they show (0 when none).
type cacheGen struct{ list, extra uint64 }

// newListing encodes records one by one, and the whole answer from them in the order given.
func newListing(records []listRecord, shape listShape) *listing {
	encoded := make([][]byte, len(records))
	for i, rec := range records {
		encoded[i] = bytes.TrimSuffix(envelope.EncodeJSON(rec.value), []byte("\n"))
	}
	whole := shape.wrap(bytes.Join(encoded, []byte(",")), "")
	l := &listing{whole: envelope.NewBody(whole), pages: map[pageQuery]*page{}, budget: pageBudget*len(whole) + minPageBudget}
	if shape.after == nil {
		return l
	}
	// Pages follow the order keys, whatever order the whole answer has.
	byOrder := make([]int, len(records))
	for i := range byOrder {
		byOrder[i] = i
	}
	slices.SortFunc(byOrder, func(i, j int) int { return strings.Compare(records[i].order, records[j].order) })
	l.items, l.orders = make([][]byte, len(records)), make([]string, len(records))
	for k, i := range byOrder {
		l.items[k], l.orders[k] = encoded[i], records[i].order
	}
	return l
}

// page cuts the page q from l: the first q.limit records whose order key is after q.after. A
// cursor names a key, not a position, so records added or removed before it move no other
// record across a page boundary.
func (l *listing) page(q pageQuery, shape listShape) *page {
	start, _ := slices.BinarySearch(l.orders, q.after)
	if start < len(l.orders) && l.orders[start] == q.after {
		start++
	}
	end := min(start+q.limit, len(l.orders))
	next := ""
	if end < len(l.orders) {
		next = shape.cursor(l.orders[end-1])
	}
	raw := shape.wrap(bytes.Join(l.items[start:end], []byte(",")), next)
	return &page{body: envelope.NewBody(raw), raw: raw, next: next}
}

// writeBody writes body as a JSON answer, in gzip when r accepts it, in as few segments as
// the connection allows (see cork.Write).
func writeBody(w http.ResponseWriter, r *http.Request, body *envelope.Body) {
	data, _ := body.For(w.Header(), r)
	cork.Write(w, r, len(data), func() { envelope.WriteEncoded(w, http.StatusOK, data) })
}
