package packages

import (
	"slices"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		code string
	}{
		{"app", ""}, {"my-app.v2_x", ""}, {"@team/app", ""}, {"0app", ""},
		{"", CodeMissingName},
		{"App", CodeInvalidName}, {"-app", CodeInvalidName}, {".app", CodeInvalidName}, {"_app", CodeInvalidName},
		{"../x", CodeInvalidName}, {"a/b", CodeInvalidName}, {"@team", CodeInvalidName}, {"@team/", CodeInvalidName},
		{"@/app", CodeInvalidName}, {"@team/app/x", CodeInvalidName}, {"@te am/app", CodeInvalidName},
		{"app%2F..", CodeInvalidName}, {"a\x00b", CodeInvalidName}, {strings.Repeat("a", 215), CodeInvalidName},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if tt.code == "" && err != nil || tt.code != "" && !IsCode(err, tt.code) {
			t.Errorf("ValidateName(%q) = %v, want %q", tt.name, err, tt.code)
		}
	}
}

func TestValidateVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"latest": true, "1.0.0": true, "0.0.1": true, "2.0.0-beta.1": true, "1.0.0+build.5": true,
		"": false, "v1.0.0": false, "1.0": false, "1": false, "../1.0.0": false, "1.0.0/..": false,
		"Latest": false, "1.0.0 ": false, "01.0.0": false, strings.Repeat("1", 200): false,
	} {
		err := ValidateVersion(v)
		if ok && err != nil || !ok && !IsCode(err, CodeInvalidVersion) {
			t.Errorf("ValidateVersion(%q) = %v", v, err)
		}
	}
}

func TestSortVersions(t *testing.T) {
	vs := []string{"1.10.0", "latest", "1.2.0", "1.2.0-rc.1", "0.9.9", "2.0.0", "1.2.0-beta"}
	SortVersions(vs)
	want := []string{"0.9.9", "1.2.0-beta", "1.2.0-rc.1", "1.2.0", "1.10.0", "2.0.0", "latest"}
	if !slices.Equal(vs, want) {
		t.Fatalf("sorted = %v, want %v", vs, want)
	}
}

func TestSplitJoinName(t *testing.T) {
	for _, tt := range []struct{ name, scope, base string }{{"@team/app", "@team", "app"}, {"app", "", "app"}} {
		if s, b := SplitName(tt.name); s != tt.scope || b != tt.base {
			t.Errorf("SplitName(%q) = %q %q", tt.name, s, b)
		}
		if got := JoinName(tt.scope, tt.base); got != tt.name {
			t.Errorf("JoinName = %q", got)
		}
	}
	if JoinName("_", "app") != "app" {
		t.Error(`JoinName("_") is not unscoped`)
	}
}

func TestCheckReserved(t *testing.T) {
	for _, tt := range []struct {
		name, prefix string
		reserved     bool
	}{
		{"api", "/api", true}, {"api", "/_/api", true}, {"api", "/v2", true}, {"cpanel", "/api", true},
		{".well-known", "/api", true}, {"_", "/_/api", true}, {"v2", "/v2", true}, {"_x", "/api", true}, {".x", "/api", true},
		{"app", "/api", false}, {"apis", "/api", false}, {"@team/api", "/api", false}, {"@api/app", "/api", false},
		{"@team/_x", "/api", true}, {"@team/.x", "/api", true},
	} {
		err := CheckReserved(tt.name, ReservedNames(tt.prefix))
		if tt.reserved != IsCode(err, CodeInvalidName) || !tt.reserved && err != nil {
			t.Errorf("CheckReserved(%q) under %s = %v, want reserved %v", tt.name, tt.prefix, err, tt.reserved)
		}
	}
}
