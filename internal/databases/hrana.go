package databases

import (
	"encoding/json"
	"errors"

	"github.com/caddy-runtime/runtime/internal/hrana"
)

// failed is the result of a request that failed.
func failed(err error) hrana.StreamResult {
	e := &hrana.Error{Message: err.Error()}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		e.Code = sqliteCode(coded.Code())
	}
	return hrana.StreamResult{Type: "error", Error: e}
}

// errorAnswer is the answer to a call that could not be run at all, in sqld's shape.
func errorAnswer(err error) []byte {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return b
}
