package config

import (
	"fmt"
	"strconv"
	"time"
)

// Bounds of a session lifetime. Browsers cap cookie lifetimes at 400 days.
const (
	MinSessionTTL = time.Minute
	MaxSessionTTL = 400 * 24 * time.Hour
)

// Bounds of the audit trail's retention.
const (
	MinAuditRetention = time.Hour
	MaxAuditRetention = 10 * 365 * 24 * time.Hour
)

var ttlUnits = map[string]time.Duration{
	"s": time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// ParseSessionTTL parses a session lifetime (see parseSpan), from 1m to 400d.
func ParseSessionTTL(s string) (time.Duration, error) {
	return parseSpan(s, MinSessionTTL, MaxSessionTTL, "session", "1m", "400d (browsers cap cookies there)")
}

// ParseAuditRetention parses how long audit entries are kept (see parseSpan), from 1h to
// 3650d.
func ParseAuditRetention(s string) (time.Duration, error) {
	return parseSpan(s, MinAuditRetention, MaxAuditRetention, "retention", "1h", "3650d")
}

// MaxRetireDelay bounds how long a replaced unit folder stays readable.
const MaxRetireDelay = time.Hour

// ParseRetireDelay parses how long a replaced or removed unit folder stays readable: a Go
// duration ("2s", "500ms") from 0, which deletes at once, to 1h.
func ParseRetireDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a duration such as 2s or 500ms")
	case d < 0:
		return 0, fmt.Errorf("must not be negative")
	case d > MaxRetireDelay:
		return 0, fmt.Errorf("too long; the longest delay is 1h")
	}
	return d, nil
}

// parseSpan parses a span of time: one or more whole numbers each followed by a unit s, m, h,
// d or w ("30m", "2h", "7d", "2w", "1d12h"), between lo and hi. A bare number is refused
// because its unit would be a guess.
func parseSpan(s string, lo, hi time.Duration, what, loText, hiText string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty value; write a number with a unit, e.g. 30m, 2h, 7d or 2w")
	}
	var total time.Duration
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		k := j
		for k < len(s) && (s[k] < '0' || s[k] > '9') {
			k++
		}
		unit, ok := ttlUnits[s[j:k]]
		if j == i || !ok {
			if k == j && j > i {
				return 0, fmt.Errorf("a bare number has no unit; write it with one, e.g. 30m, 2h, 7d or 2w")
			}
			return 0, fmt.Errorf("want a number with a unit s, m, h, d or w, e.g. 30m, 2h, 7d or 2w")
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil || n > int64(hi/unit) {
			return 0, fmt.Errorf("too long; the longest %s is %s", what, hiText)
		}
		total += time.Duration(n) * unit
		i = k
	}
	switch {
	case total < lo:
		return 0, fmt.Errorf("too short; the shortest %s is %s", what, loText)
	case total > hi:
		return 0, fmt.Errorf("too long; the longest %s is %s", what, hiText)
	}
	return total, nil
}
