package plugins

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// World is what an admission compares a plugin with: the units already installed.
type World struct {
	Workers []string          // the installed workers' names
	Bases   map[string]string // base ("/hello") → the enabled plugin serving it
}

// Admit decides whether a key may install or enable the plugin md describes (name and
// version already valid, the name within the key's namespaces). unrestricted tells a key
// with every namespace. The manifest must pass ReadManifest; its name and base must not be
// reserved; its base must hide no installed worker and no other enabled plugin; and a
// restricted key may declare no hooks, use only the default handlers, and must keep the base
// within its scope's name (@team: /team or /team-…), so one tenant cannot squat another's
// paths.
func Admit(md packages.Metadata, policy Policy, unrestricted bool, world World) error {
	if err := packages.CheckReserved(md.Name, policy.Reserved); err != nil {
		return err
	}
	m, err := ReadManifest(md, policy, "")
	if err != nil {
		return err
	}
	if !unrestricted {
		if why := m.Privileged(); why != "" {
			return namespaceDenied("plugin %s needs a key with every namespace (namespaces [\"*\"]): %s", md.Name, why)
		}
		if scope, _ := packages.SplitName(md.Name); m.Base != "" {
			prefix := "/" + strings.TrimPrefix(scope, "@")
			if m.Base != prefix && !strings.HasPrefix(m.Base, prefix+"-") {
				return namespaceDenied("base %s is outside namespace %s: a key restricted to namespaces serves plugins under %s or %s-…", m.Base, scope, prefix, prefix)
			}
		}
	}
	if err := shadowsWorker(m.Base, world.Workers); err != nil {
		return err
	}
	if other, ok := world.Bases[m.Base]; ok && m.Base != "" && other != md.Name {
		return conflict("base %s is already served by plugin %s; choose another base", m.Base, other)
	}
	return nil
}

// Bases returns the bases of the enabled plugins among units: base → plugin name, the first
// by name where several claim one.
func Bases(units []packages.Unit) map[string]string {
	bases := map[string]string{}
	for _, u := range units {
		v := u.Versions[0]
		var m struct {
			Base string `yaml:"base"`
		}
		if !v.Enabled || v.Metadata.Decode(&m) != nil || m.Base == "" {
			continue
		}
		if _, taken := bases[m.Base]; !taken {
			bases[m.Base] = u.Name
		}
	}
	return bases
}

// shadowsWorker refuses a base that would take the place of an installed worker's URL.
func shadowsWorker(base string, workers []string) error {
	if base != "" && slices.Contains(workers, base[1:]) {
		return conflict("base %s would hide worker %s, served at the same path; choose another base", base, base[1:])
	}
	return nil
}

func namespaceDenied(format string, args ...any) error {
	return &packages.Error{Kind: packages.Forbidden, Code: packages.CodeNamespaceDenied, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &packages.Error{Kind: packages.Conflict, Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}
