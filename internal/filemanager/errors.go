package filemanager

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of the file manager, besides the packages codes it passes on (PATH_TRAVERSAL,
// PAYLOAD_TOO_LARGE, INVALID_ARCHIVE).
const (
	CodeNotFound      = "FILE_NOT_FOUND"
	CodeExists        = "FILE_EXISTS"
	CodeReadOnly      = "READ_ONLY"
	CodePathForbidden = "PATH_FORBIDDEN"
	CodeNotADirectory = "NOT_A_DIRECTORY"
	CodeBadRequest    = "BAD_REQUEST"
)

func newErr(kind packages.Kind, code, format string, args ...any) *packages.Error {
	return &packages.Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return newErr(packages.NotFound, CodeNotFound, format, args...)
}

func exists(format string, args ...any) error {
	return newErr(packages.Conflict, CodeExists, format, args...)
}

func forbidden(format string, args ...any) error {
	return newErr(packages.Forbidden, CodePathForbidden, format, args...)
}

func traversal(format string, args ...any) error {
	return newErr(packages.Invalid, packages.CodePathTraversal, format, args...)
}

func badRequest(format string, args ...any) error {
	return newErr(packages.Invalid, CodeBadRequest, format, args...)
}

func notADirectory(format string, args ...any) error {
	return newErr(packages.Invalid, CodeNotADirectory, format, args...)
}

// fsError turns a file system error about the virtual path vpath into a refusal the API can
// answer; errors that are not the caller's doing are returned unchanged (a 500).
func fsError(vpath string, err error) error {
	var pe *packages.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return err
	case escapes(err), errors.Is(err, syscall.ELOOP):
		return traversal("%s leads outside its folder through a symbolic link", vpath)
	case errors.Is(err, fs.ErrNotExist):
		return notFound("%s does not exist", vpath)
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return exists("%s already exists", vpath)
	case errors.Is(err, syscall.ENOTDIR):
		return notADirectory("a part of %s is a file, not a folder", vpath)
	case errors.Is(err, syscall.EISDIR):
		return exists("%s is a folder", vpath)
	case errors.Is(err, syscall.EINVAL):
		return badRequest("cannot move %s into itself", vpath)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return badRequest("a name in %s is too long", vpath)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return newErr(packages.Forbidden, CodeReadOnly, "the runtime may not change %s: its folder is not writable", vpath)
	}
	return err
}

// escapes reports whether os.Root refused a path that leaves it. The os package does not
// export the error, so its message is the contract, as in packages.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
