// Package hrana holds the wire types of the Hrana-over-HTTP v2 pipeline (the body sqld's
// POST /v2/pipeline takes and answers) that a WebAssembly worker's database calls carry: the
// guest's driver (wasmdb) writes and reads them, the runtime's executor (databases) reads
// and writes them. Only what the two use is modelled. It imports nothing but the standard
// library, so that it builds for GOOS=wasip1.
package hrana

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// PipelineRequest is the body of one call.
type PipelineRequest struct {
	Baton    *string         `json:"baton,omitempty"`
	Requests []StreamRequest `json:"requests"`
}

// StreamRequest is one request of a pipeline: execute (with Stmt) or close.
type StreamRequest struct {
	Type string `json:"type"`
	Stmt *Stmt  `json:"stmt,omitempty"`
}

// Stmt is a statement and its arguments.
type Stmt struct {
	SQL       string     `json:"sql"`
	Args      []Value    `json:"args,omitempty"`
	NamedArgs []NamedArg `json:"named_args,omitempty"`
	WantRows  *bool      `json:"want_rows,omitempty"`
}

// NamedArg is an argument bound by its name (":name").
type NamedArg struct {
	Name  string `json:"name"`
	Value Value  `json:"value"`
}

// Value is one typed Hrana value: {"type":"integer","value":"1"}, {"type":"float","value":1.5},
// {"type":"text","value":"s"}, {"type":"blob","base64":"…"} or {"type":"null"}.
type Value struct {
	Type   string          `json:"type"`
	Value  json.RawMessage `json:"value,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

// PipelineResponse is the answer to a call; Error is set when the call could not run at all.
type PipelineResponse struct {
	Baton   *string        `json:"baton"`
	BaseURL *string        `json:"base_url"`
	Results []StreamResult `json:"results"`
	Error   string         `json:"error,omitempty"`
}

// StreamResult is the answer to one request: ok, with its Response, or error.
type StreamResult struct {
	Type     string          `json:"type"`
	Response *StreamResponse `json:"response,omitempty"`
	Error    *Error          `json:"error,omitempty"`
}

// StreamResponse is an ok request's answer; an execute's holds its Result.
type StreamResponse struct {
	Type   string      `json:"type"`
	Result *StmtResult `json:"result,omitempty"`
}

// Error is a refused request; Code is SQLite's, e.g. SQLITE_CONSTRAINT.
type Error struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// StmtResult is what a statement returned.
type StmtResult struct {
	Cols             []Col     `json:"cols"`
	Rows             [][]Value `json:"rows"`
	AffectedRowCount int64     `json:"affected_row_count"`
	LastInsertRowid  *string   `json:"last_insert_rowid"`
}

// Col is a result's column.
type Col struct {
	Name     string  `json:"name"`
	Decltype *string `json:"decltype"`
}

// Go returns v as a Go value: int64, float64, string, []byte or nil.
func (v Value) Go() (any, error) {
	switch v.Type {
	case "null":
		return nil, nil
	case "integer":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return nil, errors.New("an integer's value is a string of its digits")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %q: not a 64-bit integer", s)
		}
		return n, nil
	case "float":
		var f float64
		if err := json.Unmarshal(v.Value, &f); err != nil {
			return nil, errors.New("a float's value is a JSON number")
		}
		return f, nil
	case "text":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return nil, errors.New("a text's value is a JSON string")
		}
		return s, nil
	case "blob": // sqld writes it unpadded, the runtime padded
		b, err := base64.StdEncoding.DecodeString(v.Base64)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(v.Base64); err != nil {
				return nil, errors.New("a blob's base64 does not decode")
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown value type %q (null, integer, float, text or blob)", v.Type)
}

// Typed returns the Hrana value of x, as a column's cell is answered, and about the bytes it
// takes in the answer. A float JSON cannot write (an infinity, NaN) is null; a time is text, a
// bool an integer, any other type its text.
func Typed(x any) (Value, int) {
	switch x := x.(type) {
	case nil:
		return Value{Type: "null"}, 16
	case int64:
		s := strconv.Quote(strconv.FormatInt(x, 10))
		return Value{Type: "integer", Value: json.RawMessage(s)}, 32 + len(s)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) { // JSON has no number for them
			return Value{Type: "null"}, 16
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		return Value{Type: "float", Value: json.RawMessage(s)}, 32 + len(s)
	case string:
		b, _ := json.Marshal(x)
		return Value{Type: "text", Value: b}, 32 + len(b)
	case []byte:
		s := base64.StdEncoding.EncodeToString(x)
		return Value{Type: "blob", Base64: s}, 32 + len(s)
	case time.Time: // modernc reads a DATE or DATETIME column as a time
		return Typed(x.Format("2006-01-02 15:04:05.999999999-07:00"))
	case bool:
		if x {
			return Typed(int64(1))
		}
		return Typed(int64(0))
	}
	return Typed(fmt.Sprint(x))
}
