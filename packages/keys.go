package packages

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"
)

// DeployKeys are the manifest keys the client's deploy reads: deploy.include takes back in
// what deploy leaves out by default (node_modules).
type DeployKeys struct {
	Deploy struct {
		Include []string `yaml:"include"`
	} `yaml:"deploy"`
}

// keyNode is a manifest key the runtime reads: its subkeys when its value is a mapping of
// known keys (limits, healthcheck), or each item's when it is a list of such mappings
// (menus); free when any value is taken (env, routes, a scalar).
type keyNode struct {
	free  bool
	items bool // a list whose items are mappings of sub
	sub   map[string]*keyNode
}

// UnknownKeys tells the keys of md's manifest that none of schemas (structs with yaml tags,
// whose nested structs declare the subkeys, e.g. workers.Manifest) nor the package's own keys
// (name, version, enabled) nor deploy's declare: one warning each, naming the key by its path
// (limits.timeout) and, when a known key is close, what was meant. The runtime reads a
// manifest leniently (a key it does not know is never refused), so this is how a typo is not
// ignored without a word. A package without a manifest (package.json only) has none.
func UnknownKeys(md Metadata, schemas ...any) []string {
	if md.doc == nil || len(md.doc.Content) == 0 {
		return nil
	}
	root := &keyNode{sub: map[string]*keyNode{}}
	for _, s := range append([]any{manifestKeys{}, DeployKeys{}}, schemas...) {
		root.add(reflect.TypeOf(s))
	}
	known := root.paths("")
	var out []string
	root.walk(md.doc.Content[0], "", func(path string) {
		w := fmt.Sprintf("%s is not a manifest key", path)
		if near := nearest(path, known); near != "" {
			w += fmt.Sprintf(" (did you mean %s?)", near)
		}
		out = append(out, w+"; the runtime ignores it")
	})
	return out
}

// add declares the keys of struct type t (through pointers) in n.
func (n *keyNode) add(t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		n.free = true
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case slices.Contains(strings.Split(opts, ","), "inline"):
			n.add(f.Type)
			continue
		case name == "":
			name = strings.ToLower(f.Name) // yaml.v3's default key
		}
		child := n.sub[name]
		if child == nil {
			child = &keyNode{sub: map[string]*keyNode{}}
			n.sub[name] = child
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			child.items = true
			ft = ft.Elem()
		}
		child.add(ft)
	}
}

// walk calls unknown with the path of every key of the mapping v that n does not declare,
// and walks down the ones it declares with subkeys.
func (n *keyNode) walk(v *yaml.Node, prefix string, unknown func(path string)) {
	if n.free || v.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		key, value := v.Content[i].Value, v.Content[i+1]
		path := prefix + key
		child, ok := n.sub[key]
		switch {
		case !ok:
			unknown(path)
		case child.items && value.Kind == yaml.SequenceNode:
			for _, item := range value.Content {
				child.walk(item, path+".", unknown)
			}
		case !child.items:
			child.walk(value, path+".", unknown)
		}
	}
}

// paths lists the declared keys below n by path.
func (n *keyNode) paths(prefix string) []string {
	var out []string
	for name, child := range n.sub {
		out = append(out, prefix+name)
		if !child.free {
			out = append(out, child.paths(prefix+name+".")...)
		}
	}
	slices.Sort(out)
	return out
}

// nearest is the known key path meant by the unknown path: the closest by edit distance of
// their last parts (two edits at most, one per three letters of the key; limits.timeout is
// timeout's), on a tie a sibling, else the one nearer the top; "" when none is close.
func nearest(path string, known []string) string {
	parent, key := splitPath(path)
	type rank struct{ dist, cousin, depth int }
	best, bestRank := "", rank{dist: 3}
	for _, k := range known {
		kParent, kKey := splitPath(k)
		r := rank{dist: levenshtein.ComputeDistance(strings.ToLower(key), strings.ToLower(kKey)), depth: strings.Count(k, ".")}
		if kParent != parent {
			r.cousin = 1
		}
		if r.dist*3 > len(key) { // too far for a typo of so short a key
			continue
		}
		if cmp.Or(cmp.Compare(r.dist, bestRank.dist), cmp.Compare(r.cousin, bestRank.cousin), cmp.Compare(r.depth, bestRank.depth)) < 0 {
			best, bestRank = k, r
		}
	}
	return best
}

// splitPath splits "limits.memory" into "limits" and "memory".
func splitPath(path string) (parent, key string) {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}
