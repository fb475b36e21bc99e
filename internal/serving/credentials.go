package serving

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
)

// Credentials name the runtime's credentials, which are stripped from requests before
// uploaded code sees them and kept out of the answers of uploaded code.
type Credentials struct {
	Header  string   // the API key header, e.g. X-API-Key
	Cookies []string // the session cookies' names
	// Issuer tells the runtime's tokens from a worker's own; nil knows none.
	Issuer Issuer
}

// Issuer is what the data plane asks of the runtime's authentication (the management API):
// whether a token is one of its credentials.
type Issuer interface {
	// IsCredential reports whether token is one of the runtime's credentials (a key, a
	// session token or the root key, valid or not); a worker's own tokens are not.
	IsCredential(token string) bool
}

// Strip removes the runtime's credentials from a request header, in place, before a worker,
// a plugin route or an onRequest hook sees it: every line of the API key header, every
// Authorization line carrying a runtime credential (in any scheme, see carries), and every
// pair of every Cookie line naming a session cookie. Header and cookie names match in any
// case and a cookie's name with blanks around it, as lenient readers (Caddy's cookie
// placeholder, Go's cookie parser) would match them. The rest passes as written: the app's
// own Authorization lines, and its cookies (a Cookie line is rebuilt from its other pairs
// only when it named a session cookie).
func (c Credentials) Strip(h http.Header) {
	for name, lines := range h {
		if kept, changed := c.strip(name, lines); changed {
			setLines(h, name, kept)
		}
	}
}

// concerns tells whether Strip may change the header name.
func (c Credentials) concerns(name string) bool {
	return c.Header != "" && strings.EqualFold(name, c.Header) || strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Cookie")
}

// strip returns the lines of the header name that Strip keeps, and whether they differ from
// lines; lines itself is not changed.
func (c Credentials) strip(name string, lines []string) ([]string, bool) {
	switch {
	case c.Header != "" && strings.EqualFold(name, c.Header):
		return nil, true
	case strings.EqualFold(name, "Authorization"):
		if len(lines) > 0 && !slices.ContainsFunc(lines, c.carries) {
			return lines, false
		}
		return slices.DeleteFunc(slices.Clone(lines), c.carries), true
	case strings.EqualFold(name, "Cookie"):
		var kept []string
		changed := false
		for i, line := range lines {
			stripped := c.stripCookies(line)
			if (stripped != line || stripped == "") && !changed {
				kept, changed = append(kept, lines[:i]...), true
			}
			if changed && stripped != "" {
				kept = append(kept, stripped)
			}
		}
		if !changed && len(lines) > 0 {
			return lines, false
		}
		return kept, true
	}
	return lines, false
}

// setLines sets a header's lines, or removes the header when none is left.
func setLines(h http.Header, name string, lines []string) {
	if len(lines) == 0 {
		delete(h, name)
		return
	}
	h[name] = lines
}

// stripCookies returns a Cookie line without the pairs naming a session cookie: unchanged
// when it names none, else rebuilt from its other pairs, "" when none is left.
func (c Credentials) stripCookies(line string) string {
	if !c.namesSession(line) {
		return line
	}
	var kept []string
	for p := range strings.SplitSeq(line, ";") {
		if p = strings.TrimSpace(p); p != "" && !c.isSessionPair(p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// namesSession reports whether a Cookie line has a pair naming a session cookie.
func (c Credentials) namesSession(line string) bool {
	for p := range strings.SplitSeq(line, ";") {
		if c.isSessionPair(p) {
			return true
		}
	}
	return false
}

// isSessionPair reports whether a name=value pair names a session cookie; a pair without "="
// counts by its whole text, as browsers and DropCookie read it.
func (c Credentials) isSessionPair(pair string) bool {
	name, _, _ := strings.Cut(pair, "=")
	return namesCookie(name, c.Cookies)
}

// namesCookie reports whether name is one of cookies but for case and surrounding blanks or
// control characters.
func namesCookie(name string, cookies []string) bool {
	name = strings.TrimFunc(name, blankOrControl)
	return slices.ContainsFunc(cookies, func(c string) bool { return strings.EqualFold(name, c) })
}

// carries reports whether an Authorization value holds one of the runtime's credentials,
// whatever its scheme: bare, as the token after a scheme (Bearer in any case, Token, …), as
// an auth-param's value, or as the user or password of Basic. Clients configured for the
// API send keys to the workers' host too; a worker's own credentials (Basic with its own
// password, a bearer token of its own) pass.
func (c Credentials) carries(value string) bool {
	value = strings.TrimSpace(value)
	scheme, rest, _ := strings.Cut(value, " ")
	rest = strings.TrimSpace(rest)
	candidates := []string{value, scheme, rest}
	if strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(rest); err == nil {
			user, pass, _ := strings.Cut(string(b), ":")
			candidates = append(candidates, user, pass)
		}
	}
	for _, f := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || blankOrControl(r) }) {
		_, v, _ := strings.Cut(f, "=")
		candidates = append(candidates, f, strings.Trim(v, `"`))
	}
	return slices.ContainsFunc(candidates, c.isToken)
}

func (c Credentials) isToken(s string) bool {
	return s != "" && c.Issuer != nil && c.Issuer.IsCredential(s)
}
