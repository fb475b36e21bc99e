package databases

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The Hrana-over-HTTP v2 pipeline, as a WebAssembly worker's database calls carry it (the
// body sqld's POST /v2/pipeline takes and answers): only what the local executor reads and
// writes is modelled here.

// pipelineRequest is the body of one call.
type pipelineRequest struct {
	Baton    *string         `json:"baton,omitempty"`
	Requests []streamRequest `json:"requests"`
}

type streamRequest struct {
	Type string `json:"type"`
	Stmt *stmt  `json:"stmt,omitempty"`
}

type stmt struct {
	SQL       string     `json:"sql"`
	Args      []value    `json:"args,omitempty"`
	NamedArgs []namedArg `json:"named_args,omitempty"`
	WantRows  *bool      `json:"want_rows,omitempty"`
}

type namedArg struct {
	Name  string `json:"name"`
	Value value  `json:"value"`
}

// value is one typed Hrana value: {"type":"integer","value":"1"}, {"type":"float","value":1.5},
// {"type":"text","value":"s"}, {"type":"blob","base64":"…"} or {"type":"null"}.
type value struct {
	Type   string          `json:"type"`
	Value  json.RawMessage `json:"value,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

type pipelineResponse struct {
	Baton   *string        `json:"baton"`
	BaseURL *string        `json:"base_url"`
	Results []streamResult `json:"results"`
}

type streamResult struct {
	Type     string          `json:"type"` // ok or error
	Response *streamResponse `json:"response,omitempty"`
	Error    *hranaError     `json:"error,omitempty"`
}

type streamResponse struct {
	Type   string      `json:"type"`
	Result *stmtResult `json:"result,omitempty"`
}

type hranaError struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

type stmtResult struct {
	Cols             []col     `json:"cols"`
	Rows             [][]value `json:"rows"`
	AffectedRowCount int64     `json:"affected_row_count"`
	LastInsertRowid  *string   `json:"last_insert_rowid"`
}

type col struct {
	Name     string  `json:"name"`
	Decltype *string `json:"decltype"`
}

// arg returns v as the Go value bound to a statement.
func (v value) arg() (any, error) {
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
	case "blob":
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

// typed returns the Hrana value of what a column holds, and about the bytes it takes in the
// answer.
func typed(x any) (value, int) {
	switch x := x.(type) {
	case nil:
		return value{Type: "null"}, 16
	case int64:
		s := strconv.Quote(strconv.FormatInt(x, 10))
		return value{Type: "integer", Value: json.RawMessage(s)}, 32 + len(s)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) { // JSON has no number for them
			return value{Type: "null"}, 16
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		return value{Type: "float", Value: json.RawMessage(s)}, 32 + len(s)
	case string:
		b, _ := json.Marshal(x)
		return value{Type: "text", Value: b}, 32 + len(b)
	case []byte:
		s := base64.StdEncoding.EncodeToString(x)
		return value{Type: "blob", Base64: s}, 32 + len(s)
	case time.Time: // modernc reads a DATE or DATETIME column as a time
		return typed(x.Format("2006-01-02 15:04:05.999999999-07:00"))
	case bool:
		if x {
			return typed(int64(1))
		}
		return typed(int64(0))
	}
	return typed(fmt.Sprint(x))
}

// failed is the result of a request that failed.
func failed(err error) streamResult {
	e := &hranaError{Message: err.Error()}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		e.Code = sqliteCode(coded.Code())
	}
	return streamResult{Type: "error", Error: e}
}

// errorAnswer is the answer to a call that could not be run at all, in sqld's shape.
func errorAnswer(err error) []byte {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return b
}
