package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is an API error: an HTTP status and the code and message of the error envelope.
type Error struct {
	Status  int
	Code    string
	Message string
	// reason says why a credential was refused (AUTH_REQUIRED), for the metrics.
	reason string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf returns an API error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes shared by every route.
const (
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeInternal         = "INTERNAL_ERROR"
	CodeNotReady         = "NOT_READY"
)

// Envelope is the body of every error response.
type Envelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the content of the error envelope.
type ErrorBody struct {
	Code    string `json:"code" doc:"machine-readable error code, e.g. NOT_FOUND"`
	Message string `json:"message" doc:"what went wrong and what to do about it"`
}

// WriteError writes err as the error envelope.
func WriteError(w http.ResponseWriter, err *Error) {
	writeJSON(w, err.Status, Envelope{ErrorBody{Code: err.Code, Message: err.Message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here: every body is a plain struct.
		panic(fmt.Sprintf("handlers: encoding response: %v", err))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
