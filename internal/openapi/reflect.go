package openapi

import (
	"fmt"
	"reflect"
	"strings"
)

// Schemas derives JSON Schemas from Go types and collects named struct types as components.
type Schemas struct {
	named map[string]*Schema
	types map[string]reflect.Type
}

// NewSchemas returns an empty schema collection.
func NewSchemas() *Schemas {
	return &Schemas{named: map[string]*Schema{}, types: map[string]reflect.Type{}}
}

// Components returns the named schemas collected so far.
func (s *Schemas) Components() map[string]*Schema { return s.named }

// Of returns the schema of v's type: a $ref for a named struct (registered as a component),
// an inline schema otherwise.
//
// Struct fields follow encoding/json: the json tag names the property, "-" skips it, and a
// field without omitempty is required. The tag `doc:"…"` sets the description, `enum:"a,b"`
// the allowed values and `format:"…"` the format (e.g. binary for an uploaded file). The items
// of a slice of pointers to a scalar may be null.
func (s *Schemas) Of(v any) *Schema {
	return s.of(reflect.TypeOf(v))
}

func (s *Schemas) of(t reflect.Type) *Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &Schema{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	case reflect.Slice, reflect.Array:
		if e := t.Elem(); e.Kind() == reflect.Pointer && e.Elem().Kind() != reflect.Struct {
			// Items that may be missing, such as the empty steps of a chart's series.
			item := s.of(e.Elem())
			item.Type = []string{item.Type.(string), "null"}
			return &Schema{Type: "array", Items: item}
		}
		return &Schema{Type: "array", Items: s.of(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("openapi: map key of %s must be a string", t))
		}
		return &Schema{Type: "object", AdditionalProperties: s.of(t.Elem())}
	case reflect.Interface:
		return &Schema{}
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t)
		}
		return s.ref(t)
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func (s *Schemas) ref(t reflect.Type) *Schema {
	name := t.Name()
	if prev, ok := s.types[name]; ok && prev != t {
		panic(fmt.Sprintf("openapi: two types named %s (%s and %s)", name, prev, t))
	}
	if _, ok := s.types[name]; !ok {
		s.types[name] = t
		s.named[name] = nil // reserve the name first so recursive types terminate
		s.named[name] = s.object(t)
	}
	return &Schema{Ref: "#/components/schemas/" + name}
}

func (s *Schemas) object(t reflect.Type) *Schema {
	obj := &Schema{Type: "object", Properties: map[string]*Schema{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop := s.of(f.Type)
		if doc, enum, format := f.Tag.Get("doc"), f.Tag.Get("enum"), f.Tag.Get("format"); doc != "" || enum != "" || format != "" {
			if prop.Ref != "" {
				// Siblings of $ref are allowed in 3.1 but some tools drop them; keep the
				// reference intact and describe the property beside it.
				prop = &Schema{Ref: prop.Ref}
			}
			prop.Description = doc
			prop.Format = format
			for _, e := range strings.Split(enum, ",") {
				if e != "" {
					prop.Enum = append(prop.Enum, e)
				}
			}
		}
		obj.Properties[name] = prop
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			obj.Required = append(obj.Required, name)
		}
	}
	return obj
}
