package hosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// ChallengeLabel is the label in front of a custom domain whose TXT record proves control of it.
const ChallengeLabel = "_runtime-challenge"

// Refusals of a custom domain, each with its reason in the error's text.
var (
	ErrNotDomain   = errors.New("not a domain name")
	ErrIPLiteral   = errors.New("an IP address cannot be a custom domain")
	ErrOwnHost     = errors.New("the runtime's own host")
	ErrUnderDomain = errors.New("under workers_domain")
)

// CheckCustom returns raw as a custom domain (lower case, no trailing dot), or why it cannot
// be one: an IP literal, not a DNS name of at least two labels, one of own (the hosts the API
// and the cpanel are served at), or a name under d.
func CheckCustom(raw string, d Domain, own []string) (string, error) {
	name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return "", fmt.Errorf("%w: %s", ErrIPLiteral, raw)
	}
	if !ValidName(name) || !strings.Contains(name, ".") {
		return "", fmt.Errorf("%w: %q; write a name such as shop.example.com (letters, digits and '-'; punycode for others)", ErrNotDomain, raw)
	}
	if slices.Contains(own, name) {
		return "", fmt.Errorf("%w: %s serves the API or the cpanel", ErrOwnHost, name)
	}
	if d.Under(name) {
		return "", fmt.Errorf("%w: %s is under %s, whose names are the workers' own", ErrUnderDomain, name, d.Name)
	}
	return name, nil
}

// Verifier checks the TXT record that proves control of a custom domain, through the system's
// resolver or the ones Resolvers names (host:port; port 53 when left out). It makes DNS
// queries only, never HTTP.
type Verifier struct {
	Resolvers []string
	Timeout   time.Duration // per check; 0 is 5 s
}

// Check looks up the TXT records of _runtime-challenge.<domain> and returns nil when one holds
// token exactly, else why not.
func (v Verifier) Check(ctx context.Context, domain, token string) error {
	timeout := v.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	record := ChallengeLabel + "." + domain
	var (
		txts []string
		err  error
	)
	if len(v.Resolvers) == 0 {
		txts, err = net.DefaultResolver.LookupTXT(ctx, record)
	} else {
		for _, addr := range v.Resolvers {
			if txts, err = resolverAt(addr).LookupTXT(ctx, record); err == nil || isNotFound(err) {
				break
			}
		}
	}
	switch {
	case isNotFound(err):
		return fmt.Errorf("no TXT record at %s: add one holding the token", record)
	case err != nil:
		return fmt.Errorf("looking up the TXT record at %s: %w", record, err)
	case slices.Contains(txts, token):
		return nil
	}
	return fmt.Errorf("the TXT records at %s do not hold the token (found %d other)", record, len(txts))
}

func isNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

// resolverAt is a resolver that asks the DNS server at addr.
func resolverAt(addr string) *net.Resolver {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "53")
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
