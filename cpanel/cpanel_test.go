package cpanel

import "testing"

func TestOwns(t *testing.T) {
	for path, want := range map[string]bool{
		"/cpanel": true, "/cpanel/": true, "/cpanel/keys": true, "/cpanelx": false, "/app/cpanel/": false, "/": false,
	} {
		if got := Owns(path); got != want {
			t.Errorf("Owns(%q) = %v, want %v", path, got, want)
		}
	}
}
