package openapi

import (
	"encoding/json"
	"testing"
)

type inner struct {
	Code string `json:"code" doc:"machine-readable code"`
}

type outer struct {
	Name     string            `json:"name" doc:"the name"`
	Count    int64             `json:"count,omitempty"`
	Ok       bool              `json:"ok"`
	Tags     []string          `json:"tags"`
	Labels   map[string]string `json:"labels,omitempty"`
	Inner    inner             `json:"inner"`
	Ptr      *inner            `json:"ptr,omitempty"`
	State    string            `json:"state" enum:"on,off"`
	File     string            `json:"file,omitempty" format:"binary"`
	Skipped  string            `json:"-"`
	unexport string
	Recur    []outer `json:"recur,omitempty"`
}

func TestSchemasOf(t *testing.T) {
	s := NewSchemas()
	got := s.Of(outer{})
	if got.Ref != "#/components/schemas/outer" {
		t.Fatalf("Of(outer) = %+v, want a $ref", got)
	}
	b, _ := json.Marshal(s.Components())
	want := `{"inner":{"type":"object","properties":{"code":{"type":"string","description":"machine-readable code"}},"required":["code"]},` +
		`"outer":{"type":"object","properties":{"count":{"type":"integer"},"file":{"type":"string","format":"binary"},"inner":{"$ref":"#/components/schemas/inner"},` +
		`"labels":{"type":"object","additionalProperties":{"type":"string"}},"name":{"type":"string","description":"the name"},` +
		`"ok":{"type":"boolean"},"ptr":{"$ref":"#/components/schemas/inner"},` +
		`"recur":{"type":"array","items":{"$ref":"#/components/schemas/outer"}},` +
		`"state":{"type":"string","enum":["on","off"]},"tags":{"type":"array","items":{"type":"string"}}},` +
		`"required":["name","ok","tags","inner","state"]}}`
	if string(b) != want {
		t.Fatalf("components =\n%s\nwant\n%s", b, want)
	}
}

func TestSchemasOfScalars(t *testing.T) {
	s := NewSchemas()
	tests := []struct {
		v    any
		want string
	}{
		{"", `{"type":"string"}`},
		{0, `{"type":"integer"}`},
		{1.5, `{"type":"number"}`},
		{[]int{}, `{"type":"array","items":{"type":"integer"}}`},
		{[]*float64{}, `{"type":"array","items":{"type":["number","null"]}}`},
		{struct {
			A string `json:"a,omitempty"`
		}{}, `{"type":"object","properties":{"a":{"type":"string"}}}`},
	}
	for _, tt := range tests {
		b, _ := json.Marshal(s.Of(tt.v))
		if string(b) != tt.want {
			t.Errorf("Of(%T) = %s, want %s", tt.v, b, tt.want)
		}
	}
}

func TestSchemasNameClashPanics(t *testing.T) {
	s := NewSchemas()
	s.Of(inner{})
	type inner struct{ X int }
	defer func() {
		if recover() == nil {
			t.Fatal("two different types with one name did not panic")
		}
	}()
	s.Of(inner{})
}
