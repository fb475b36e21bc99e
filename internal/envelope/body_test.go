package envelope

import "testing"

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                       false,
		"gzip":                   true,
		"br, gzip":               true,
		"deflate, gzip;q=0.5":    true,
		"gzip;q=0":               false,
		"gzip; q=0.0, br":        false,
		"*":                      true,
		"identity":               false,
		"x-gzip":                 false,
		"br;q=1.0, gzip ; q=0.1": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}
