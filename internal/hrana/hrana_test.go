package hrana

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestValueRoundTrip: what Typed writes, Go reads back as the same value, through JSON.
func TestValueRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"null", nil, nil},
		{"integer", int64(1) << 62, int64(1) << 62},
		{"negative", int64(-7), int64(-7)},
		{"float", 2.25, 2.25},
		{"tiny float", 1e-300, 1e-300},
		{"text", "héllo \"q\"", "héllo \"q\""},
		{"blob", []byte{0, 255, 1}, []byte{0, 255, 1}},
		{"empty blob", []byte{}, []byte{}},
		{"true", true, int64(1)},
		{"false", false, int64(0)},
		{"time", time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC), "2026-12-05 01:02:03+00:00"},
		{"NaN", math.NaN(), nil},
		{"other", int32(5), "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, size := Typed(tc.in)
			if size <= 0 {
				t.Fatalf("size %d", size)
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var back Value
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			got, err := back.Go()
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s read back as %#v, want %#v", b, got, tc.want)
			}
		})
	}
}

// TestValueRefused: a value that is not what its type says is refused with the reason.
func TestValueRefused(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"type":"integer","value":1}`, "an integer's value is a string of its digits"},
		{`{"type":"integer","value":"99999999999999999999"}`, `integer "99999999999999999999": not a 64-bit integer`},
		{`{"type":"float","value":"x"}`, "a float's value is a JSON number"},
		{`{"type":"text","value":1}`, "a text's value is a JSON string"},
		{`{"type":"blob","base64":"!!"}`, "a blob's base64 does not decode"},
		{`{"type":"date"}`, `unknown value type "date" (null, integer, float, text or blob)`},
	} {
		var v Value
		if err := json.Unmarshal([]byte(tc.json), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Go(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}

// TestBlobUnpadded: sqld writes a blob's base64 without padding.
func TestBlobUnpadded(t *testing.T) {
	got, err := Value{Type: "blob", Base64: "AP8"}.Go()
	if err != nil || !reflect.DeepEqual(got, []byte{0, 255}) {
		t.Fatalf("%#v, %v", got, err)
	}
}
