package hosts

import (
	"strings"
	"testing"
)

func TestParseDomain(t *testing.T) {
	tests := []struct {
		raw  string
		want Domain
		ok   bool
	}{
		{"", Domain{}, true},
		{"apps.example.com", Domain{"apps.example.com", "https", ""}, true},
		{"Apps.Example.COM.", Domain{"apps.example.com", "https", ""}, true},
		{"https://apps.example.com", Domain{"apps.example.com", "https", ""}, true},
		{"http://apps.localhost:8080", Domain{"apps.localhost", "http", "8080"}, true},
		{"http://apps.localhost:8080/", Domain{"apps.localhost", "http", "8080"}, true},
		{"localhost", Domain{"localhost", "https", ""}, true},
		{"ftp://apps.example.com", Domain{}, false},
		{"https://apps.example.com/x", Domain{}, false},
		{"https://u:p@apps.example.com", Domain{}, false},
		{"127.0.0.1", Domain{}, false},
		{"com", Domain{}, false},
		{"apps_x.example.com", Domain{}, false},
		{"-apps.example.com", Domain{}, false},
	}
	for _, tt := range tests {
		got, err := ParseDomain(tt.raw)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDomain(%q) = %+v, %v; want %+v, ok %v", tt.raw, got, err, tt.want, tt.ok)
		}
	}
}

func TestDomainHostAndWorker(t *testing.T) {
	d := Domain{Name: "apps.example.com", Scheme: "https"}
	tests := []struct {
		name, host string // host "" when the name has none
	}{
		{"app", "app.apps.example.com"},
		{"@team/app", "app.team.apps.example.com"},
		{"my-app2", "my-app2.apps.example.com"},
		{"my_app", ""},
		{"my.app", ""},
		{"@te.am/app", ""},
		{"@team/a_b", ""},
		{"-x", ""},
		{string(make([]byte, 64)), ""},
	}
	for _, tt := range tests {
		host, err := d.Host(tt.name)
		if (err == nil) != (tt.host != "") || host != tt.host {
			t.Errorf("Host(%q) = %q, %v; want %q", tt.name, host, err, tt.host)
			continue
		}
		if tt.host == "" {
			continue
		}
		for _, h := range []string{host, host + ":8443", host + ".", strings.ToUpper(host)} {
			if got, ok := d.Worker(h); !ok || got != tt.name {
				t.Errorf("Worker(%q) = %q, %v; want %q", h, got, ok, tt.name)
			}
		}
	}
	for _, host := range []string{"apps.example.com", "example.com", "a.b.c.apps.example.com", "x.otherapps.example.com",
		"app.apps.example.com.evil.com", "app_x.apps.example.com", ".apps.example.com", "a..apps.example.com", ""} {
		if name, ok := d.Worker(host); ok {
			t.Errorf("Worker(%q) = %q, want none", host, name)
		}
	}
	if u, _ := (Domain{Name: "apps.localhost", Scheme: "http", Port: "8080"}).URL("@t/x"); u != "http://x.t.apps.localhost:8080" {
		t.Errorf("URL = %q", u)
	}
}

func TestRouter(t *testing.T) {
	var r Router
	if _, _, ok := r.Worker("app.apps.example.com"); ok {
		t.Error("a router without a domain routed a host")
	}
	r.SetDomain(Domain{Name: "apps.example.com", Scheme: "https"})
	r.SetCustom(map[string]string{"shop.example.org": "@team/shop"}, map[string]string{"new.example.org": "app"})
	if name, ok := r.Pending("NEW.example.org"); !ok || name != "app" {
		t.Errorf("Pending = %q, %v", name, ok)
	}
	tests := []struct {
		host, name string
		custom, ok bool
	}{
		{"app.apps.example.com", "app", false, true},
		{"Shop.Example.org:443", "@team/shop", true, true},
		{"other.example.org", "", false, false},
		{"new.example.org", "", false, false}, // pending: not routed
	}
	for _, tt := range tests {
		name, custom, ok := r.Worker(tt.host)
		if name != tt.name || custom != tt.custom || ok != tt.ok {
			t.Errorf("Worker(%q) = %q %v %v", tt.host, name, custom, ok)
		}
	}
}
