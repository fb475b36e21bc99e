// Package hosts maps host names to workers: a host of its own for each worker under the
// workers_domain setting (<name>.<domain>, <name>.<scope>.<domain>) and the verified custom
// domains attached to workers. It holds the answers in memory, so a request or a TLS handshake
// asks nothing of the disk or the key store.
package hosts

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
)

// Domain is the workers_domain setting: the domain under which each worker has a host, and the
// scheme and port its URLs carry (https and the default port unless written otherwise).
type Domain struct {
	Name   string // "apps.example.com", lower case, no trailing dot; "" when unset
	Scheme string // "https" or "http"
	Port   string // "" for the scheme's default
}

// ParseDomain reads the workers_domain setting: a domain such as apps.example.com, or a base URL
// such as http://apps.localhost:8080 whose scheme and port the workers' URLs carry. "" is unset.
func ParseDomain(raw string) (Domain, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Domain{}, nil
	}
	d := Domain{Scheme: "https"}
	host := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return Domain{}, errors.New("not a domain or a URL")
		}
		if u.Scheme != "https" && u.Scheme != "http" {
			return Domain{}, fmt.Errorf("scheme %q: use https:// or http://", u.Scheme)
		}
		if u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return Domain{}, errors.New("write a domain such as apps.example.com, or a scheme, domain and port only")
		}
		d.Scheme, d.Port, host = u.Scheme, u.Port(), u.Hostname()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(host) != nil {
		return Domain{}, errors.New("an IP address has no subdomains: write a domain such as apps.example.com")
	}
	if !ValidName(host) || !strings.Contains(host, ".") && host != "localhost" {
		return Domain{}, errors.New("not a domain name: write one such as apps.example.com")
	}
	d.Name = host
	return d, nil
}

// ValidName reports whether host is a DNS name of letter-digit-hyphen labels (lower case), at
// most 253 characters.
func ValidName(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if !ValidLabel(label) {
			return false
		}
	}
	return true
}

// ValidLabel reports whether s can be one label of a host name: 1 to 63 lower-case letters,
// digits and hyphens, neither first nor last a hyphen.
func ValidLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Host returns the host name of worker name ("app" or "@team/app") under d, or why it has none:
// each part of the name must be a DNS label.
func (d Domain) Host(name string) (string, error) {
	if d.Name == "" {
		return "", errors.New("workers_domain is not set")
	}
	scope, base := "", name
	if strings.HasPrefix(name, "@") {
		s, b, ok := strings.Cut(name[1:], "/")
		if !ok {
			return "", fmt.Errorf("%q is not a worker name", name)
		}
		scope, base = s, b
	}
	for _, part := range []string{base, scope} {
		if part != "" && !ValidLabel(part) {
			return "", fmt.Errorf("%q cannot be part of a host name (letters, digits and '-' only, at most 63): the worker is served at its path only", part)
		}
	}
	host := base + "." + d.Name
	if scope != "" {
		host = base + "." + scope + "." + d.Name
	}
	if len(host) > 253 {
		return "", errors.New("the host name would be longer than 253 characters: the worker is served at its path only")
	}
	return host, nil
}

// URL returns the base URL of worker name's host ("https://app.apps.example.com"), or why it
// has none.
func (d Domain) URL(name string) (string, error) {
	host, err := d.Host(name)
	if err != nil {
		return "", err
	}
	return d.Scheme + "://" + withPort(host, d.Port), nil
}

// BaseURL returns d as a base URL ("https://apps.example.com"), "" when unset.
func (d Domain) BaseURL() string {
	if d.Name == "" {
		return ""
	}
	return d.Scheme + "://" + withPort(d.Name, d.Port)
}

func withPort(host, port string) string {
	if port == "" {
		return host
	}
	return host + ":" + port
}

// Worker returns the worker whose host name host is under d ("app.apps.example.com" → "app",
// "app.team.apps.example.com" → "@team/app"), with or without a port. The domain itself and
// hosts of more levels name no worker.
func (d Domain) Worker(host string) (string, bool) {
	if d.Name == "" || len(host) <= len(d.Name)+1 {
		return "", false
	}
	host = Normalize(host)
	sub, ok := strings.CutSuffix(host, d.Name)
	if !ok || sub == "" || sub[len(sub)-1] != '.' {
		return "", false
	}
	sub = sub[:len(sub)-1]
	base, scope, scoped := strings.Cut(sub, ".")
	switch {
	case !ValidLabel(base):
		return "", false
	case !scoped:
		return base, true
	case !ValidLabel(scope):
		return "", false // a dot in scope too: more levels than a worker's host has
	}
	return "@" + scope + "/" + base, true
}

// Under reports whether host is d's domain or a name under it.
func (d Domain) Under(host string) bool {
	if d.Name == "" {
		return false
	}
	return host == d.Name || strings.HasSuffix(host, "."+d.Name)
}

// Normalize returns host in the form hosts are compared in: lower case, without a port or a
// trailing dot. A host already in that form is returned as it is, without allocating.
func Normalize(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	for i := 0; i < len(host); i++ {
		if c := host[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}

// Router answers which worker a host name belongs to: one of the domain's hosts, or a verified
// custom domain. It is safe for concurrent use; its answers come from memory.
type Router struct {
	domain  atomic.Pointer[Domain]
	custom  atomic.Pointer[map[string]string] // verified custom domain → worker
	pending atomic.Pointer[map[string]string] // custom domain not verified yet → worker
}

// SetDomain sets the workers_domain in force (the latest config's).
func (r *Router) SetDomain(d Domain) { r.domain.Store(&d) }

// Domain returns the workers_domain in force; its Name is "" when unset.
func (r *Router) Domain() Domain {
	if r == nil {
		return Domain{}
	}
	if d := r.domain.Load(); d != nil {
		return *d
	}
	return Domain{}
}

// SetCustom replaces the custom domains, domain (normalized) → worker name: the verified ones,
// which route, and those pending verification, which Pending names.
func (r *Router) SetCustom(verified, pending map[string]string) {
	r.custom.Store(&verified)
	r.pending.Store(&pending)
}

// Pending returns the worker a custom domain not verified yet is attached to.
func (r *Router) Pending(host string) (string, bool) {
	if m := r.pending.Load(); m != nil && len(*m) > 0 {
		name, ok := (*m)[Normalize(host)]
		return name, ok
	}
	return "", false
}

// Worker returns the worker host names: by its host under the domain, or as a verified custom
// domain. custom tells which.
func (r *Router) Worker(host string) (name string, custom, ok bool) {
	if r == nil {
		return "", false, false
	}
	if d := r.domain.Load(); d != nil {
		if name, ok := d.Worker(host); ok {
			return name, false, true
		}
	}
	if m := r.custom.Load(); m != nil && len(*m) > 0 {
		if name, ok := (*m)[Normalize(host)]; ok {
			return name, true, true
		}
	}
	return "", false, false
}
