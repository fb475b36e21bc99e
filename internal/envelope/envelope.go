// Package envelope is the runtime's error envelope, {"error":{"code","message"}}, which every
// error answer carries: the management API's, a worker's that the runtime answers for, a
// plugin's. It also writes the runtime's JSON answers, and keeps the bodies of answers sent
// often in gzip for the clients that take it.
package envelope

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddy-runtime/runtime/api"
)

// Error is an error answer: an HTTP status and the code and message of the envelope.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf returns an error answer with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes that every part of the runtime may answer.
const (
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeInternal         = "INTERNAL_ERROR"
	CodeNotReady         = "NOT_READY"
	CodeBadRequest       = "BAD_REQUEST"
	CodePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
)

// Write writes err as the error envelope (api.Envelope).
func Write(w http.ResponseWriter, err *Error) {
	WriteJSON(w, err.Status, api.Envelope{Error: api.ErrorBody{Code: err.Code, Message: err.Message}})
}

// Internal is the answer to a failure inside the runtime, which is logged with requestID:
// the message names the id, and nothing of the failure.
func Internal(requestID string) *Error {
	return Errorf(http.StatusInternalServerError, CodeInternal, "internal error; report request id %s to the operator", requestID)
}

// WriteJSON writes v as a JSON answer with status, never cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	WriteEncoded(w, status, EncodeJSON(v))
}

// EncodeJSON encodes v as the body of a JSON answer, for WriteEncoded: answers that change
// seldom are encoded once.
func EncodeJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here: every body is a plain struct.
		panic(fmt.Sprintf("envelope: encoding an answer: %v", err))
	}
	return append(body, '\n')
}

// chunkingThreshold is the body size above which net/http would send a body of unknown length
// in chunks; below it, net/http computes Content-Length itself, and a header set here would
// only cost a copy and a field on the access log line of the most frequent answers.
const chunkingThreshold = 2048

// WriteEncoded writes body, from EncodeJSON, as a JSON answer with status, never cached.
func WriteEncoded(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if len(body) > chunkingThreshold {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
