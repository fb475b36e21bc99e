// Package packages holds workers and plugins on disk: package metadata, name and version
// rules, hardened archive extraction, atomic installs, discovery and manifest edits.
package packages

import (
	"errors"
	"fmt"
)

// Kind classifies a refused package operation; the API maps it to an HTTP status.
type Kind int

// Kinds of refusal.
const (
	Invalid   Kind = iota // 400
	Forbidden             // 403
	NotFound              // 404
	Conflict              // 409
	TooLarge              // 413
)

// Error is a refused package operation with the API error code and a message saying what to do.
type Error struct {
	Kind    Kind
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func newErr(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// IsCode reports whether err is a package Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Error codes.
const (
	CodeInvalidFileType = "INVALID_FILE_TYPE"
	CodeInvalidArchive  = "INVALID_ARCHIVE"
	CodePathTraversal   = "PATH_TRAVERSAL"
	CodeTooLarge        = "PAYLOAD_TOO_LARGE"
	CodeMissingName     = "MISSING_PACKAGE_NAME"
	CodeInvalidName     = "INVALID_PACKAGE_NAME"
	CodeInvalidVersion  = "INVALID_PACKAGE_VERSION"
	CodeInvalidManifest = "INVALID_MANIFEST"
	CodeNamespaceDenied = "NAMESPACE_DENIED"
)
