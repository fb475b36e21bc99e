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
	NoSpace               // 507: the disk holding the folder is full
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
	CodeNoSpace         = "INSUFFICIENT_STORAGE"
)

// noSpace returns the refusal of a write that failed for lack of disk space, or nil for
// another error: the disk is this runtime's, not the archive's fault.
func noSpace(err error) error {
	if err == nil || !diskFull(err) {
		return nil
	}
	// The innermost error, the system's: the path around it is the runtime's business.
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(err) {
		err = inner
	}
	return newErr(NoSpace, CodeNoSpace, "not enough disk space to unpack and install the package (%v); nothing was installed: free space on the runtime's disk and try again", err)
}
