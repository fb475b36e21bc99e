package serving

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
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
// whether a text holds one of its credentials.
type Issuer interface {
	// HoldsCredential reports whether s holds one of the runtime's credentials (a key, a
	// session token or the root key, valid or not) anywhere in it; a worker's own tokens do
	// not.
	HoldsCredential(s string) bool
}

// Strip removes the runtime's credentials from a request header, in place, before a worker,
// a plugin route or an onRequest hook sees it: every line of the API key header, every
// Authorization or Proxy-Authorization line holding a runtime credential anywhere, in any
// scheme and shape (see carries), and every pair naming a session cookie of every Cookie line,
// split at ";" or ",". Header and cookie names match in any case, header names also with "_"
// for "-" (CGI gives both the same variable), and a cookie's name with blanks around it, as
// lenient readers (Caddy's cookie placeholder, Go's cookie parser) would match them. The rest
// passes as written: the app's own Authorization lines, and its cookies (a Cookie line is
// rebuilt from its other pairs only when it named a session cookie).
func (c Credentials) Strip(h http.Header) {
	for name, lines := range h {
		if kept, changed := c.strip(name, lines); changed {
			setLines(h, name, kept)
		}
	}
}

// concerns tells whether Strip may change the header name.
func (c Credentials) concerns(name string) bool {
	return c.Header != "" && sameHeader(name, c.Header) || authorization(name) || sameHeader(name, "Cookie")
}

// authorization reports whether name is a header of credentials in a scheme.
func authorization(name string) bool {
	return sameHeader(name, "Authorization") || sameHeader(name, "Proxy-Authorization")
}

// sameHeader reports whether two header names match but for ASCII case and "_" for "-".
func sameHeader(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if fold(a[i]) != fold(b[i]) {
			return false
		}
	}
	return true
}

// fold is a header name's byte in lower case, "_" read as "-".
func fold(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// strip returns the lines of the header name that Strip keeps, and whether they differ from
// lines; lines itself is not changed.
func (c Credentials) strip(name string, lines []string) ([]string, bool) {
	switch {
	case c.Header != "" && sameHeader(name, c.Header):
		return nil, true
	case authorization(name):
		if len(lines) > 0 && !slices.ContainsFunc(lines, c.carries) {
			return lines, false
		}
		return slices.DeleteFunc(slices.Clone(lines), c.carries), true
	case sameHeader(name, "Cookie"):
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
// when it names none, else rebuilt from its other pairs, "" when none is left. Pairs end at
// ";", and at "," too, which RFC 2965 and lenient servers read as a separator; the pairs
// between two ";" are joined with "; " as before, those between commas keep their text (a
// value may hold a comma).
func (c Credentials) stripCookies(line string) string {
	if !c.namesSession(line) {
		return line
	}
	var kept []string
	for p := range strings.SplitSeq(line, ";") {
		if strings.Contains(p, ",") {
			p = strings.Join(slices.DeleteFunc(strings.Split(p, ","), c.isSessionPair), ",")
		}
		if p = strings.TrimSpace(p); p != "" && !c.isSessionPair(p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// cookieSeparator ends a pair of a Cookie line.
func cookieSeparator(r rune) bool { return r == ';' || r == ',' }

// namesSession reports whether a Cookie line has a pair naming a session cookie.
func (c Credentials) namesSession(line string) bool {
	for p := range strings.FieldsFuncSeq(line, cookieSeparator) {
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
// whatever its scheme and syntax: anywhere in the value as written (bare, after a scheme and
// any separator, quoted, in an auth-param), percent-decoded, or in base64 (std or url
// alphabet, padded or not, as Basic's user or password or any other way) in a run of the
// value's characters. Clients configured for the API send keys to the workers' host too, and
// a malformed line is still read by some server. A worker's own credentials (Basic with its
// own password, a bearer token of its own) pass.
func (c Credentials) carries(value string) bool {
	if c.Issuer == nil {
		return false
	}
	if c.Issuer.HoldsCredential(value) {
		return true
	}
	if strings.Contains(value, "%") && c.Issuer.HoldsCredential(percentDecoded(value)) {
		return true
	}
	for run := range strings.FieldsFuncSeq(value, notBase64) {
		// The encoding may start past the run's first characters ("Basic" glued to it).
		for skip := 0; skip < 4 && len(run)-skip >= minEncoded; skip++ {
			if b, ok := decodeBase64(run[skip:]); ok && c.Issuer.HoldsCredential(string(b)) {
				return true
			}
		}
	}
	return false
}

// minEncoded is the shortest base64 text of a credential ("rtk_" and more).
const minEncoded = 6

// notBase64 tells the characters outside both base64 alphabets; "=" too, since padding ends
// a text.
func notBase64(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '/' || r == '-' || r == '_')
}

// toStdAlphabet turns base64url into standard base64.
var toStdAlphabet = strings.NewReplacer("-", "+", "_", "/")

// decodeBase64 decodes unpadded base64 in either alphabet (or a mix), dropping a last
// character that cannot end a text.
func decodeBase64(s string) ([]byte, bool) {
	if len(s)%4 == 1 {
		s = s[:len(s)-1]
	}
	if strings.ContainsAny(s, "-_") {
		s = toStdAlphabet.Replace(s)
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}

// percentDecoded decodes the value's valid %XX escapes and keeps the rest as written, unlike
// url.PathUnescape, which gives up on the first invalid one.
func percentDecoded(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
