package handlers

import (
	"net/http"

	"github.com/caddy-runtime/runtime/envelope"
)

// Error is an API error: an HTTP status and the code and message of the error envelope.
type Error = envelope.Error

// Errorf returns an API error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return envelope.Errorf(status, code, format, args...)
}

// Error codes shared by every route.
const (
	CodeNotFound         = envelope.CodeNotFound
	CodeMethodNotAllowed = envelope.CodeMethodNotAllowed
	CodeInternal         = envelope.CodeInternal
	CodeNotReady         = envelope.CodeNotReady
	CodeBadRequest       = envelope.CodeBadRequest
	CodePayloadTooLarge  = envelope.CodePayloadTooLarge
	// CodeKeyStoreUnavailable answers a write to the key store (keys, sessions) in sync mode
	// while its primary cannot be reached.
	CodeKeyStoreUnavailable = "KEY_STORE_UNAVAILABLE"
)

// WriteError writes err as the error envelope.
func WriteError(w http.ResponseWriter, err *Error) { envelope.Write(w, err) }

func writeJSON(w http.ResponseWriter, status int, v any) { envelope.WriteJSON(w, status, v) }
