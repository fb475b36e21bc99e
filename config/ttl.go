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

var ttlUnits = map[string]time.Duration{
	"s": time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// ParseSessionTTL parses a session lifetime: one or more whole numbers each followed by a unit
// s, m, h, d or w ("30m", "2h", "7d", "2w", "1d12h"). A bare number is refused because its unit
// would be a guess.
func ParseSessionTTL(s string) (time.Duration, error) {
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
		if err != nil || n > int64(MaxSessionTTL/unit) {
			return 0, fmt.Errorf("too long; the longest session is 400d")
		}
		total += time.Duration(n) * unit
		i = k
	}
	switch {
	case total < MinSessionTTL:
		return 0, fmt.Errorf("too short; the shortest session is 1m")
	case total > MaxSessionTTL:
		return 0, fmt.Errorf("too long; the longest session is 400d (browsers cap cookies there)")
	}
	return total, nil
}
