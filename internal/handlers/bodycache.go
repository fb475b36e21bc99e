package handlers

import (
	"net/http"
	"strings"
	"sync"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/keystore"
)

// maxCachedBodies bounds the bodies a bodyCache keeps for one generation (one per set of
// namespaces that asked).
const maxCachedBodies = 64

// bodyCache keeps the encoded answers of a listing for the generation of its source, one per
// set of namespaces the callers may see: a listing that has not changed is answered with a
// copy instead of building and encoding it again.
type bodyCache struct {
	mu     sync.Mutex
	gen    cacheGen
	bodies map[string]*envelope.Body
}

// serve answers with the body for gen and the namespaces of p, building it with build when
// it is not kept; cacheable false (the source could not name its generation) always builds.
func (c *bodyCache) serve(w http.ResponseWriter, r *http.Request, p keystore.Principal, gen cacheGen, cacheable bool, build func() (any, error)) error {
	key := "*"
	if !p.Unrestricted() {
		key = strings.Join(p.Namespaces, "\x00")
	}
	if cacheable {
		c.mu.Lock()
		body, ok := c.bodies[key]
		if c.gen != gen {
			ok = false
		}
		c.mu.Unlock()
		if ok {
			writeBody(w, r, body)
			return nil
		}
	}
	v, err := build()
	if err != nil {
		return err
	}
	body := envelope.NewBody(envelope.EncodeJSON(v))
	if cacheable {
		c.mu.Lock()
		if c.gen != gen || c.bodies == nil || len(c.bodies) >= maxCachedBodies {
			c.gen, c.bodies = gen, map[string]*envelope.Body{}
		}
		c.bodies[key] = body
		c.mu.Unlock()
	}
	writeBody(w, r, body)
	return nil
}

// cacheGen names what a kept body was built from: the generation of its listing, and of other
// state it shows (0 when none).
type cacheGen struct{ list, extra uint64 }

// writeBody writes body as a JSON answer, in gzip when r accepts it.
func writeBody(w http.ResponseWriter, r *http.Request, body *envelope.Body) {
	data, _ := body.For(w.Header(), r)
	envelope.WriteEncoded(w, http.StatusOK, data)
}
