package config

import (
	"bytes"
	"encoding/json"
)

// Written returns the settings v sets, by name (their JSON keys are their names), as JSON.
func (v AppValues) Written() map[string]json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("config: " + err.Error()) // strings, numbers and lists of strings always marshal
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		panic("config: " + err.Error())
	}
	return out
}

// Names are the names of the settings v sets, in the order of Definitions.
func (v AppValues) Names() []string {
	return Differing(v, AppValues{}, true)
}

// Differing names, in the order of Definitions, the settings that a and b both set to
// different values, and with strict also those only one of them sets.
func Differing(a, b AppValues, strict bool) []string {
	wa, wb := a.Written(), b.Written()
	var names []string
	for _, d := range Definitions {
		va, inA := wa[d.Name]
		vb, inB := wb[d.Name]
		switch {
		case inA && inB && !bytes.Equal(va, vb):
			names = append(names, d.Name)
		case strict && inA != inB:
			names = append(names, d.Name)
		}
	}
	return names
}

// Over returns base with the settings v sets put in place of base's.
func (v AppValues) Over(base AppValues) AppValues {
	merged := base.Written()
	for name, value := range v.Written() {
		merged[name] = value
	}
	b, err := json.Marshal(merged)
	if err != nil {
		panic("config: " + err.Error())
	}
	var out AppValues
	if err := json.Unmarshal(b, &out); err != nil {
		panic("config: " + err.Error())
	}
	return out
}
