package plugins

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// Plugin is a plugin the plan loads.
type Plugin struct {
	Name     string
	Version  string
	Dir      string // the plugin's folder
	Manifest Manifest
}

// Failure is a plugin left out of the load, with why.
type Failure struct {
	Name   string `json:"name"`
	Reason Reason `json:"-"`
	Error  string `json:"error"` // what to tell the operator
}

// Reason is the kind of a Failure.
type Reason int

// The reasons a plugin is left out.
const (
	// Invalid: its manifest is invalid, breaks the policy or its base hides a worker.
	Invalid Reason = iota + 1
	// Unmet: a required dependency is missing, disabled or left out.
	Unmet
	// Cycle: it is part of a dependency cycle.
	Cycle
	// BaseTaken: a plugin earlier in the order serves its base.
	BaseTaken
	// NotProvisioned: its handlers failed to provision (reported by the plugin host).
	NotProvisioned
)

// String names the reason in snake_case, as the API reports it.
func (r Reason) String() string {
	switch r {
	case Invalid:
		return "invalid"
	case Unmet:
		return "unmet_dependency"
	case Cycle:
		return "cycle"
	case BaseTaken:
		return "base_taken"
	case NotProvisioned:
		return "not_provisioned"
	}
	return "unknown"
}

// Plan is what to load, in order, and what was left out.
type Plan struct {
	Load   []Plugin
	Failed []Failure
}

// MakePlan orders the enabled plugins so that every plugin comes after its dependencies and
// its optional dependencies that load. A plugin is left out when its manifest is invalid or
// breaks the policy, when its base would hide one of workers (the installed worker names),
// when a required dependency is missing, disabled or left out itself (transitively), when it
// is part of a dependency cycle, or when its base is taken by a plugin earlier in the order.
// The loaded plugins' file roots are absolute paths inside their folders.
func MakePlan(units []packages.Unit, policy Policy, workers []string) Plan {
	var plan Plan
	fail := func(name string, reason Reason, format string, args ...any) {
		plan.Failed = append(plan.Failed, Failure{Name: name, Reason: reason, Error: fmt.Sprintf(format, args...)})
	}
	byName := map[string]Plugin{}
	disabled := map[string]bool{}
	for _, u := range units {
		v := u.Versions[0]
		if !v.Enabled {
			disabled[u.Name] = true
			continue
		}
		m, err := ReadManifest(v.Metadata, policy, u.Path)
		if err == nil {
			err = shadowsWorker(m.Base, workers)
		}
		if err != nil {
			fail(u.Name, Invalid, "%s", describe(err))
			continue
		}
		byName[u.Name] = Plugin{Name: u.Name, Version: v.Version, Dir: u.Path, Manifest: m}
	}

	// Leave out plugins whose required dependencies cannot load, until nothing changes.
	dropUnloadable := func() {
		for changed := true; changed; {
			changed = false
			for _, name := range sortedKeys(byName) {
				for _, dep := range byName[name].Manifest.Dependencies {
					if _, ok := byName[dep]; ok {
						continue
					}
					why := "missing"
					if disabled[dep] {
						why = "disabled"
					} else if i := slices.IndexFunc(plan.Failed, func(f Failure) bool { return f.Name == dep }); i >= 0 {
						why = "not loaded"
						if plan.Failed[i].Reason == Cycle {
							why = "in a dependency cycle"
						}
					}
					fail(name, Unmet, "requires %s, which is %s", dep, why)
					delete(byName, name)
					changed = true
					break
				}
			}
		}
	}
	dropUnloadable()
	// Order what can be ordered; take out the plugins on cycles and what requires them, and
	// order again, so an optional dependency on a plugin that failed blocks nothing.
	var order []string
	for {
		var cycles [][]string
		order, cycles = topoSort(byName)
		if len(order) == len(byName) || len(cycles) == 0 {
			break
		}
		for _, cycle := range cycles {
			for _, name := range cycle {
				fail(name, Cycle, "dependency cycle: %s", strings.Join(append(slices.Clone(cycle), cycle[0]), " → "))
				delete(byName, name)
			}
		}
		dropUnloadable()
	}
	bases := map[string]string{}
	for _, name := range order {
		p := byName[name]
		if b := p.Manifest.Base; b != "" {
			if other, taken := bases[b]; taken {
				fail(name, BaseTaken, "base %s is already served by plugin %s", b, other)
				continue
			}
			bases[b] = name
		}
		if dep := missingDep(p, plan.Failed); dep != "" {
			fail(name, Unmet, "requires %s, which is not loaded", dep)
			continue
		}
		plan.Load = append(plan.Load, p)
	}
	slices.SortStableFunc(plan.Failed, func(a, b Failure) int { return strings.Compare(a.Name, b.Name) })
	return plan
}

// describe says why a plugin is left out: an invalid manifest, or the rule it breaks.
func describe(err error) string {
	if packages.IsCode(err, packages.CodeInvalidManifest) {
		return "invalid manifest: " + err.Error()
	}
	if packages.IsCode(err, CodeNotAllowed) {
		return "not allowed: " + err.Error()
	}
	return err.Error()
}

// missingDep returns a required dependency of p that failed after ordering (a cycle or a base
// clash), so its dependents are left out too.
func missingDep(p Plugin, failed []Failure) string {
	for _, dep := range p.Manifest.Dependencies {
		if slices.ContainsFunc(failed, func(f Failure) bool { return f.Name == dep }) {
			return dep
		}
	}
	return ""
}

// topoSort orders plugins dependencies first (Kahn's algorithm, ties by name), counting
// optional dependencies that are present; plugins on cycles are returned as the cycles.
func topoSort(byName map[string]Plugin) ([]string, [][]string) {
	deps := map[string][]string{}
	indegree := map[string]int{}
	for name, p := range byName {
		indegree[name] += 0
		for _, d := range slices.Concat(p.Manifest.Dependencies, p.Manifest.OptionalDependencies) {
			if _, ok := byName[d]; ok && !slices.Contains(deps[d], name) {
				deps[d] = append(deps[d], name)
				indegree[name]++
			}
		}
	}
	var ready, order []string
	for name, n := range indegree {
		if n == 0 {
			ready = append(ready, name)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		name := ready[0]
		ready = ready[1:]
		order = append(order, name)
		for _, dependent := range deps[name] {
			if indegree[dependent]--; indegree[dependent] == 0 {
				ready = append(ready, dependent)
			}
		}
	}
	if len(order) == len(byName) {
		return order, nil
	}
	return order, cyclesAmong(byName, order)
}

// cyclesAmong finds the cycles among the plugins topoSort could not order. Plugins that only
// depend on a cycle are not on one; the caller reports them separately.
func cyclesAmong(byName map[string]Plugin, ordered []string) [][]string {
	left := map[string]bool{}
	for name := range byName {
		if !slices.Contains(ordered, name) {
			left[name] = true
		}
	}
	var cycles [][]string
	seen := map[string]bool{}
	for _, start := range sortedKeys(left) {
		if seen[start] {
			continue
		}
		// Walk dependencies until a plugin repeats: the repeat closes a cycle.
		var path []string
		at := map[string]int{}
		for cur := start; left[cur] && !seen[cur]; {
			at[cur] = len(path)
			path = append(path, cur)
			seen[cur] = true
			next := ""
			for _, d := range slices.Concat(byName[cur].Manifest.Dependencies, byName[cur].Manifest.OptionalDependencies) {
				if left[d] {
					next = d
					break
				}
			}
			if i, ok := at[next]; ok {
				cycles = append(cycles, path[i:])
				break
			}
			cur = next
		}
	}
	return cycles
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
