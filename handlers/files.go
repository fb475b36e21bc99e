package handlers

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/filemanager"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/openapi"
	"github.com/caddy-runtime/runtime/packages"
)

// FileEntry is one file, folder or link in a file manager listing.
type FileEntry struct {
	Name        string `json:"name"`
	Path        string `json:"path" doc:"virtual path: <root folder name>/<path inside it>"`
	IsDirectory bool   `json:"isDirectory"`
	IsSymlink   bool   `json:"isSymlink,omitempty" doc:"a symbolic link; isDirectory and size describe its target when the target lies inside the unit, and are false and 0 otherwise. Links are never followed outside their unit"`
	Size        int64  `json:"size" doc:"bytes of a file; 0 for folders"`
	UpdatedAt   int64  `json:"updatedAt" doc:"modification time, Unix seconds"`
	Visibility  string `json:"visibility" enum:"built-in,uploaded" doc:"the source of the root the entry lies in: built-in roots (name starting with '.') are read-only"`
}

// FileListing is the content of a folder.
type FileListing struct {
	Path     string      `json:"path" doc:"the listed folder; \"\" for the list of roots"`
	Writable bool        `json:"writable" doc:"whether the path policy lets files be created in this folder (the key's permissions aside): inside a version folder for workers, inside a plugin folder for plugins, never in a built-in root"`
	Entries  []FileEntry `json:"entries" doc:"folders first, then by name"`
}

// FileListResponse is the body of GET …/files/list.
type FileListResponse struct {
	Success bool        `json:"success"`
	Data    FileListing `json:"data"`
}

// FilePathRequest names one file or folder.
type FilePathRequest struct {
	Path string `json:"path" doc:"virtual path: <root folder name>/<path inside it>"`
}

// FileRenameRequest renames a file or folder in place.
type FileRenameRequest struct {
	Path    string `json:"path"`
	NewName string `json:"newName" doc:"a single name, without '/'"`
}

// FileMoveRequest moves a file or folder into another folder of the same root.
type FileMoveRequest struct {
	Path     string `json:"path"`
	DestPath string `json:"destPath" doc:"the destination folder"`
}

// FileBatchRequest names several files or folders.
type FileBatchRequest struct {
	Paths []string `json:"paths"`
}

// FileMoveBatchRequest moves several files or folders into one folder.
type FileMoveBatchRequest struct {
	Paths    []string `json:"paths"`
	DestPath string   `json:"destPath" doc:"the destination folder"`
}

// FileBatchResponse is the body of a batch: the paths that failed, with why.
type FileBatchResponse struct {
	Success bool     `json:"success"`
	Errors  []string `json:"errors,omitempty" doc:"one \"<path>: <why>\" per path that was not done; the others were"`
}

// FileRefreshRequest is the optional body of POST …/files/refresh.
type FileRefreshRequest struct {
	Path string `json:"path,omitempty"`
}

// FilePathResult names where a file or folder is after a change.
type FilePathResult struct {
	Path string `json:"path" doc:"the virtual path of the created, renamed or moved entry"`
}

// FilePathResponse is the body of mkdir, rename and move.
type FilePathResponse struct {
	Success bool           `json:"success"`
	Data    FilePathResult `json:"data"`
}

// FileUploadForm documents the multipart form of POST …/files/upload.
type FileUploadForm struct {
	Path  string   `json:"path" doc:"the destination folder; created when missing"`
	Files []string `json:"files[]" doc:"file parts (binary); a file whose name ends in .zip is extracted in place"`
	Paths []string `json:"paths[],omitempty" doc:"for folder uploads: the relative path of each file, in the order of files[]; default the file name"`
}

// FileUploadResult describes a completed upload.
type FileUploadResult struct {
	Path  string `json:"path" doc:"the destination folder"`
	Files int    `json:"files" doc:"files written, those extracted from zips included"`
	Bytes int64  `json:"bytes" doc:"their total size"`
}

// FileUploadResponse is the body of POST …/files/upload.
type FileUploadResponse struct {
	Success bool             `json:"success"`
	Data    FileUploadResult `json:"data"`
}

// fileSurface is one of the two file managers of the API.
type fileSurface struct {
	name                  string // path segment and operationId prefix: "workers" or "plugins"
	noun                  string // "worker" or "plugin"
	catalog               func(a *API) *packages.Catalog
	read, install, remove string // permissions
	layout                string // the writable part of the layout, for descriptions
}

var fileSurfaces = []fileSurface{
	{
		name: "workers", noun: "worker", catalog: func(a *API) *packages.Catalog { return a.opts.Workers },
		read: keystore.WorkersRead, install: keystore.WorkersInstall, remove: keystore.WorkersRemove,
		layout: "Writes land strictly inside a version folder (<root>/<name>/<version>/… or <root>/@scope/<name>/<version>/…); name, scope and version folders are never created, renamed, moved or deleted here.",
	},
	{
		name: "plugins", noun: "plugin", catalog: func(a *API) *packages.Catalog { return a.opts.Plugins },
		read: keystore.PluginsRead, install: keystore.PluginsInstall, remove: keystore.PluginsRemove,
		layout: "Writes land strictly inside a plugin folder (<root>/<name>/… or <root>/@scope/<name>/…); the plugin folder itself is never renamed, moved or deleted here (use DELETE plugins/{name}).",
	},
}

// Limits of the file manager's requests.
const (
	maxFileBatch = 1000 // paths in one batch
	// uploadFraming is what a multipart body may hold beyond its files: boundaries, part
	// headers and the path fields.
	uploadFraming = 1 << 20
)

// fileRoutes are the file manager's routes under workers/files and plugins/files.
func (a *API) fileRoutes() []route {
	var routes []route
	for _, s := range fileSurfaces {
		routes = append(routes, a.fileSurfaceRoutes(s)...)
	}
	return routes
}

// Descriptions of the error answers of file manager routes.
const (
	fileBadPath      = "A malformed path: '..', absolute, backslash or NUL (PATH_TRAVERSAL), a link leading outside its unit (PATH_TRAVERSAL), an empty element (BAD_REQUEST), a file where a folder is needed (NOT_A_DIRECTORY)"
	fileBadBody      = "; a malformed body (BAD_REQUEST)"
	fileReadDenied   = "The path lies in a namespace outside the key's (NAMESPACE_DENIED) or goes through a linked unit folder (PATH_FORBIDDEN)"
	fileWriteDenied  = "The path lies in a namespace outside the key's (NAMESPACE_DENIED), in a built-in root (READ_ONLY), or outside the writable part of the layout (PATH_FORBIDDEN)"
	fileNotFound     = "No such file, folder or root (FILE_NOT_FOUND)"
	fileExists       = "The target already exists, or a file meets a folder (FILE_EXISTS)"
	fileBodyTooLarge = "Body over 64 KiB (PAYLOAD_TOO_LARGE)"
)

// fileSurfaceRoutes are the routes of one surface.
func (a *API) fileSurfaceRoutes(s fileSurface) []route {
	base := "/" + s.name + "/files/"
	id := func(op string) string { return s.name + "Files" + op }
	tag := s.name
	pathParam := func(required bool, doc string) []openapi.Parameter {
		return []openapi.Parameter{{Name: "path", In: "query", Required: required, Description: doc, Schema: &openapi.Schema{Type: "string"}}}
	}
	jsonBody := func(v any) *request { return &request{contentType: "application/json", body: v} }
	binary := map[string]*openapi.Schema{
		"application/octet-stream": {Type: "string", Format: "binary", Description: "a file"},
		"application/zip":          {Type: "string", Format: "binary", Description: "a folder, or several paths, as a zip"},
	}
	zipOnly := map[string]*openapi.Schema{"application/zip": binary["application/zip"]}
	desc := func(text string) string {
		return text + " Paths are virtual: <root folder name>/<path inside it>, where the roots are the " + s.noun +
			" folders (" + s.noun + "_dirs). " + s.layout + " Built-in roots are read-only; a namespace-restricted key reaches only @scope folders of its namespaces."
	}
	return []route{
		{
			method: "GET", path: base + "list", id: id("List"), tag: tag, permission: s.read,
			summary:     "List a " + s.noun + " folder",
			description: desc("Lists a folder; path \"\" (or none) lists the roots, built-in ones included (visibility built-in). A restricted key sees only the @scope folders of its namespaces in a root."),
			params:      pathParam(false, "the folder; \"\" for the roots"),
			responses: []response{
				{status: http.StatusOK, description: "The folder's entries", body: FileListResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath),
				errorResponse(http.StatusForbidden, fileReadDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
			},
			handle: a.fileList(s),
		},
		{
			method: "POST", path: base + "mkdir", id: id("Mkdir"), tag: tag, permission: s.install,
			summary:     "Create a folder in a " + s.noun,
			description: desc("Creates the folder with its missing parents."),
			request:     jsonBody(FilePathRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Created", body: FilePathResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+fileBadBody),
				errorResponse(http.StatusForbidden, fileWriteDenied),
				errorResponse(http.StatusNotFound, "The version or plugin folder does not exist (FILE_NOT_FOUND)"),
				errorResponse(http.StatusConflict, fileExists),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileMkdir(s),
		},
		{
			method: "DELETE", path: base + "delete", id: id("Delete"), tag: tag, permission: s.remove,
			summary:     "Delete a file or folder of a " + s.noun,
			description: desc("Removes a file, a link (never its target) or a folder with its content."),
			request:     jsonBody(FilePathRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Deleted", body: Success{}},
				errorResponse(http.StatusBadRequest, fileBadPath+fileBadBody),
				errorResponse(http.StatusForbidden, fileWriteDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileDelete(s),
		},
		{
			method: "POST", path: base + "rename", id: id("Rename"), tag: tag, permission: s.install,
			summary:     "Rename a file or folder of a " + s.noun,
			description: desc("Renames in place; newName is a single name."),
			request:     jsonBody(FileRenameRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Renamed; data.path is the new path", body: FilePathResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a newName that is not a single name"+fileBadBody),
				errorResponse(http.StatusForbidden, fileWriteDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusConflict, fileExists),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileRename(s),
		},
		{
			method: "POST", path: base + "move", id: id("Move"), tag: tag, permission: s.install,
			summary:     "Move a file or folder of a " + s.noun,
			description: desc("Moves path into the folder destPath, within one root; both paths obey the policy and the namespaces."),
			request:     jsonBody(FileMoveRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Moved; data.path is the new path", body: FilePathResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a move across roots or into itself"+fileBadBody),
				errorResponse(http.StatusForbidden, fileWriteDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusConflict, fileExists),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileMove(s),
		},
		{
			method: "POST", path: base + "upload", id: id("Upload"), tag: tag, permission: s.install,
			summary: "Upload files into a " + s.noun,
			description: desc("Writes the files[] parts into the folder path (created when missing), each at its paths[] entry or its file name; " +
				"existing files are replaced and folders merged. A .zip file is extracted in place, with the defences and limits of package uploads. " +
				"All of it is staged first, so a refused upload changes nothing."),
			request: &request{contentType: "multipart/form-data", body: FileUploadForm{}},
			responses: []response{
				{status: http.StatusOK, description: "Written", body: FileUploadResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a zip entry leaving its folder (PATH_TRAVERSAL); a corrupt zip (INVALID_ARCHIVE); a malformed form (BAD_REQUEST)"),
				errorResponse(http.StatusForbidden, fileWriteDenied),
				errorResponse(http.StatusNotFound, "The version or plugin folder does not exist (FILE_NOT_FOUND)"),
				errorResponse(http.StatusConflict, fileExists),
				errorResponse(http.StatusRequestEntityTooLarge, "Over a limit (PAYLOAD_TOO_LARGE), named in the message: max_upload_size for the files, max_unpacked_size and max_archive_entries for each zip, max_archive_entries for the number of files"),
			},
			handle: a.fileUpload(s),
		},
		{
			method: "GET", path: base + "refresh", id: id("Refresh"), tag: tag, permission: s.read,
			summary:     "Refresh a " + s.noun + " folder",
			description: desc("Listings are read from disk every time, so nothing is cached; this checks the path and answers success, for clients that call it."),
			params:      pathParam(false, "the folder; optional"),
			responses: []response{
				{status: http.StatusOK, description: "Nothing to drop", body: Success{}},
				errorResponse(http.StatusBadRequest, fileBadPath),
				errorResponse(http.StatusForbidden, fileReadDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
			},
			handle: a.fileRefresh(s),
		},
		{
			method: "POST", path: base + "refresh", id: id("RefreshPost"), tag: tag, permission: s.read,
			summary:     "Refresh a " + s.noun + " folder",
			description: desc("As GET; the body {path?} may be empty."),
			request:     jsonBody(FileRefreshRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Nothing to drop", body: Success{}},
				errorResponse(http.StatusBadRequest, fileBadPath+fileBadBody),
				errorResponse(http.StatusForbidden, fileReadDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileRefresh(s),
		},
		{
			method: "GET", path: base + "download", id: id("Download"), tag: tag, permission: s.read,
			summary:     "Download a file or folder of a " + s.noun,
			description: desc("A file as an attachment (application/octet-stream), or a folder as a zip holding the folder. Links are kept as links when their target lies inside the unit and left out otherwise."),
			params:      pathParam(true, "the file or folder"),
			responses: []response{
				{status: http.StatusOK, description: "The file, or the folder as a zip", content: binary},
				errorResponse(http.StatusBadRequest, fileBadPath+"; path \"\" or a special file (BAD_REQUEST)"),
				errorResponse(http.StatusForbidden, fileReadDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
			},
			handle: a.fileDownload(s),
		},
		{
			method: "POST", path: base + "delete-batch", id: id("DeleteBatch"), tag: tag, permission: s.remove,
			summary:     "Delete several files or folders of a " + s.noun,
			description: desc(fmt.Sprintf("Deletes each path as DELETE delete would; the paths that fail are listed in errors and the others are deleted. At most %d paths.", maxFileBatch)),
			request:     jsonBody(FileBatchRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Done, with the paths that failed", body: FileBatchResponse{}},
				errorResponse(http.StatusBadRequest, "No paths, or too many (BAD_REQUEST)"+fileBadBody),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileDeleteBatch(s),
		},
		{
			method: "POST", path: base + "move-batch", id: id("MoveBatch"), tag: tag, permission: s.install,
			summary:     "Move several files or folders of a " + s.noun,
			description: desc(fmt.Sprintf("Moves each path into destPath as move would; the paths that fail are listed in errors and the others are moved. At most %d paths.", maxFileBatch)),
			request:     jsonBody(FileMoveBatchRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Done, with the paths that failed", body: FileBatchResponse{}},
				errorResponse(http.StatusBadRequest, "No paths, or too many (BAD_REQUEST); "+fileBadPath+" in destPath"+fileBadBody),
				errorResponse(http.StatusForbidden, "destPath: "+fileWriteDenied),
				errorResponse(http.StatusNotFound, "destPath: "+fileNotFound),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileMoveBatch(s),
		},
		{
			method: "GET", path: base + "download-batch", id: id("DownloadBatch"), tag: tag, permission: s.read,
			summary:     "Download several files or folders of a " + s.noun + " as a zip",
			description: desc("A zip of the paths that can be read, each under its base name (\"name (2)\" when two share one); the others are left out."),
			params: []openapi.Parameter{{Name: "paths", In: "query", Required: true, Schema: &openapi.Schema{Type: "string"},
				Description: fmt.Sprintf("comma-separated paths (the parameter may also be repeated); at most %d", maxFileBatch)}},
			responses: []response{
				{status: http.StatusOK, description: "The zip", content: zipOnly},
				errorResponse(http.StatusBadRequest, "No paths, or too many (BAD_REQUEST)"),
				errorResponse(http.StatusNotFound, "None of the paths can be read (FILE_NOT_FOUND); the message says why for each"),
			},
			handle: a.fileDownloadBatch(s),
		},
	}
}

// fileManager returns a surface's file manager, or 503 while its catalog is missing.
func (a *API) fileManager(s fileSurface) (*filemanager.Surface, error) {
	c, err := catalog(s.catalog(a))
	if err != nil {
		return nil, err
	}
	return filemanager.ForCatalog(c), nil
}

// fileGuard checks every path of a request against the caller's namespaces.
func fileGuard(r *http.Request) filemanager.Guard {
	p := principalOf(r.Context())
	return func(unit string) error { return authorizeUnit(p, unit) }
}

// fileMessage is why one path of a batch failed.
func fileMessage(err error) string {
	var e *Error
	if errors.As(packageError(err), &e) {
		return e.Message
	}
	return "internal error"
}

// auditFile logs one write of the file manager: "success", "denied" for a refusal by policy,
// namespace or containment, "failed" otherwise.
func (a *API) auditFile(r *http.Request, s fileSurface, op, target string, err error, extra ...zap.Field) {
	outcome := "success"
	if err != nil {
		outcome = "failed"
		var e *Error
		if errors.As(packageError(err), &e) && (e.Status == http.StatusForbidden || e.Code == packages.CodePathTraversal) {
			outcome = "denied"
		}
	}
	p := principalOf(r.Context())
	a.audit(r, "files."+op, target, outcome, &p, append(extra, zap.String("surface", s.name))...)
}

func (a *API) fileList(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		l, err := fm.List(fileGuard(r), r.URL.Query().Get("path"))
		if err != nil {
			return packageError(err)
		}
		out := FileListing{Path: l.Path, Writable: l.Writable, Entries: make([]FileEntry, 0, len(l.Entries))}
		for _, e := range l.Entries {
			visibility := "uploaded"
			if e.BuiltIn {
				visibility = "built-in"
			}
			out.Entries = append(out.Entries, FileEntry{Name: e.Name, Path: e.Path, IsDirectory: e.IsDir, IsSymlink: e.IsLink,
				Size: e.Size, UpdatedAt: e.ModTime.Unix(), Visibility: visibility})
		}
		writeJSON(w, http.StatusOK, FileListResponse{Success: true, Data: out})
		return nil
	}
}

// auditedRequest is a file manager write request that says what its audit line names: the
// path it acts on and further fields.
type auditedRequest interface {
	audited() (string, []zap.Field)
}

func (r FilePathRequest) audited() (string, []zap.Field) { return r.Path, nil }

func (r FileRenameRequest) audited() (string, []zap.Field) {
	return r.Path, []zap.Field{zap.String("newName", r.NewName)}
}

func (r FileMoveRequest) audited() (string, []zap.Field) {
	return r.Path, []zap.Field{zap.String("destPath", r.DestPath)}
}

// fileWrite runs one file manager change from a JSON request: decode it, make the change,
// audit it as op, and answer with the body the change returns.
func fileWrite[R auditedRequest](a *API, s fileSurface, op string, change func(*filemanager.Surface, filemanager.Guard, R) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		var req R
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		body, err := change(fm, fileGuard(r), req)
		target, extra := req.audited()
		a.auditFile(r, s, op, target, err, extra...)
		if err != nil {
			return packageError(err)
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	}
}

// pathAnswer is the answer of a change that names where its result is.
func pathAnswer(loc filemanager.Location) FilePathResponse {
	return FilePathResponse{Success: true, Data: FilePathResult{Path: loc.Path}}
}

func (a *API) fileMkdir(s fileSurface) handlerFunc {
	return fileWrite(a, s, "mkdir", func(fm *filemanager.Surface, g filemanager.Guard, req FilePathRequest) (any, error) {
		loc, err := fm.Mkdir(g, req.Path)
		return pathAnswer(loc), err
	})
}

func (a *API) fileDelete(s fileSurface) handlerFunc {
	return fileWrite(a, s, "delete", func(fm *filemanager.Surface, g filemanager.Guard, req FilePathRequest) (any, error) {
		_, err := fm.Delete(g, req.Path)
		return Success{Success: true}, err
	})
}

func (a *API) fileRename(s fileSurface) handlerFunc {
	return fileWrite(a, s, "rename", func(fm *filemanager.Surface, g filemanager.Guard, req FileRenameRequest) (any, error) {
		loc, err := fm.Rename(g, req.Path, req.NewName)
		return pathAnswer(loc), err
	})
}

func (a *API) fileMove(s fileSurface) handlerFunc {
	return fileWrite(a, s, "move", func(fm *filemanager.Surface, g filemanager.Guard, req FileMoveRequest) (any, error) {
		loc, err := fm.Move(g, req.Path, req.DestPath)
		return pathAnswer(loc), err
	})
}

func (a *API) fileRefresh(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		p := r.URL.Query().Get("path")
		if r.Method == http.MethodPost && r.ContentLength != 0 {
			var req FileRefreshRequest
			if err := decodeJSON(w, r, &req); err != nil {
				return err
			}
			p = req.Path
		}
		if err := fm.Check(fileGuard(r), p); err != nil {
			return packageError(err)
		}
		writeJSON(w, http.StatusOK, Success{Success: true})
		return nil
	}
}

// checkBatch refuses an empty or oversized batch.
func checkBatch(paths []string) error {
	switch {
	case len(paths) == 0:
		return Errorf(http.StatusBadRequest, CodeBadRequest, "paths is empty; name at least one path")
	case len(paths) > maxFileBatch:
		return Errorf(http.StatusBadRequest, CodeBadRequest, "%d paths is more than the %d one batch may hold", len(paths), maxFileBatch)
	}
	return nil
}

func (a *API) fileDeleteBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		var req FileBatchRequest
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		if err := checkBatch(req.Paths); err != nil {
			return err
		}
		g := fileGuard(r)
		out := FileBatchResponse{Success: true}
		var firstErr error
		for _, p := range req.Paths {
			if _, err := fm.Delete(g, p); err != nil {
				out.Errors = append(out.Errors, p+": "+fileMessage(err))
				firstErr = cmpErr(firstErr, err)
			}
		}
		a.auditFile(r, s, "delete-batch", strings.Join(req.Paths, ", "), firstErr, zap.Int("failed", len(out.Errors)))
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

func (a *API) fileMoveBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		var req FileMoveBatchRequest
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		if err := checkBatch(req.Paths); err != nil {
			return err
		}
		g := fileGuard(r)
		// A destination that cannot take anything fails the whole batch at once.
		if err := fm.CheckDestination(g, req.DestPath); err != nil {
			a.auditFile(r, s, "move-batch", strings.Join(req.Paths, ", "), err, zap.String("destPath", req.DestPath))
			return packageError(err)
		}
		out := FileBatchResponse{Success: true}
		var firstErr error
		for _, p := range req.Paths {
			if _, err := fm.Move(g, p, req.DestPath); err != nil {
				out.Errors = append(out.Errors, p+": "+fileMessage(err))
				firstErr = cmpErr(firstErr, err)
			}
		}
		a.auditFile(r, s, "move-batch", strings.Join(req.Paths, ", "), firstErr,
			zap.String("destPath", req.DestPath), zap.Int("failed", len(out.Errors)))
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// cmpErr keeps the error a batch is audited with: a refusal (denied) wins over any other.
func cmpErr(kept, err error) error {
	var e *Error
	if kept == nil || errors.As(packageError(err), &e) && e.Status == http.StatusForbidden {
		return err
	}
	return kept
}

func (a *API) fileDownload(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		d, err := fm.Open(fileGuard(r), r.URL.Query().Get("path"))
		if err != nil {
			return packageError(err)
		}
		defer d.Close()
		return a.sendDownload(w, r, d)
	}
}

func (a *API) fileDownloadBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		var paths []string
		for _, v := range r.URL.Query()["paths"] {
			for p := range strings.SplitSeq(v, ",") {
				if p != "" {
					paths = append(paths, p)
				}
			}
		}
		if err := checkBatch(paths); err != nil {
			return err
		}
		d, failed := fm.OpenBatch(fileGuard(r), paths)
		if d == nil {
			var why []string
			for _, f := range failed {
				why = append(why, f.Path+": "+fileMessage(f.Err))
			}
			return Errorf(http.StatusNotFound, filemanager.CodeNotFound, "none of the paths can be downloaded: %s", strings.Join(why, "; "))
		}
		defer d.Close()
		return a.sendDownload(w, r, d)
	}
}

// sendDownload streams a download. The headers go out with the first byte, so a failure
// before it is still an error envelope; a failure after it aborts the response, so the client
// sees a broken transfer rather than a truncated file that looks complete.
func (a *API) sendDownload(w http.ResponseWriter, r *http.Request, d *filemanager.Download) error {
	lw := &lazyHeaderWriter{w: w, header: func() {
		h := w.Header()
		if d.IsZip {
			h.Set("Content-Type", "application/zip")
		} else {
			h.Set("Content-Type", "application/octet-stream")
			h.Set("Content-Length", fmt.Sprint(d.Size))
		}
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.Name}))
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	}}
	_, err := d.WriteTo(lw)
	switch {
	case err == nil:
		lw.start() // an empty file has written nothing yet
		return nil
	case !lw.started:
		return packageError(err)
	}
	a.opts.Logger.Warn("download failed after it started", zap.String("request_id", RequestID(r.Context())), zap.Error(err))
	panic(http.ErrAbortHandler)
}

// lazyHeaderWriter writes the headers just before the first byte of the body.
type lazyHeaderWriter struct {
	w       io.Writer
	header  func()
	started bool
}

func (l *lazyHeaderWriter) start() {
	if !l.started {
		l.started = true
		l.header()
	}
}

func (l *lazyHeaderWriter) Write(p []byte) (int, error) {
	l.start()
	return l.w.Write(p)
}

// fileUpload reads the multipart form as a stream: the files are spooled, in one temporary
// file, counting their bytes against max_upload_size, and handed to the file manager once the
// form is complete, because paths[] may follow the files it names.
func (a *API) fileUpload(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s)
		if err != nil {
			return err
		}
		limits := s.catalog(a).Limits()
		if limits.Upload > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limits.Upload+uploadFraming)
		}
		spool, err := os.CreateTemp("", "runtime-files-*")
		if err != nil {
			return err
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		form, err := readUploadForm(r, spool, limits)
		if err != nil {
			return packageError(err)
		}
		res, err := fm.Upload(fileGuard(r), form.dest, form.files, limits)
		a.auditFile(r, s, "upload", form.dest, err, zap.Int("files", len(form.files)))
		if err != nil {
			return packageError(err)
		}
		writeJSON(w, http.StatusOK, FileUploadResponse{Success: true, Data: FileUploadResult{Path: res.Path, Files: res.Files, Bytes: res.Bytes}})
		return nil
	}
}

// uploadForm is a read upload form.
type uploadForm struct {
	dest  string
	files []filemanager.UploadFile
}

// readUploadForm reads the parts of an upload: path, files[] (spooled into spool) and
// paths[]. Refusals are *packages.Error or *Error values.
func readUploadForm(r *http.Request, spool *os.File, limits packages.Limits) (uploadForm, error) {
	var form uploadForm
	mr, err := r.MultipartReader()
	if err != nil {
		return form, Errorf(http.StatusBadRequest, CodeBadRequest, "send multipart/form-data with the fields path, files[] and optionally paths[]")
	}
	var names []string
	var offset int64
	seenPath := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return form, uploadReadError(err, limits)
		}
		switch field := part.FormName(); field {
		case "path":
			if form.dest, err = formValue(part, field); err != nil {
				return form, uploadReadError(err, limits)
			}
			seenPath = true
		case "paths[]", "paths":
			v, err := formValue(part, field)
			if err != nil {
				return form, uploadReadError(err, limits)
			}
			names = append(names, v)
		case "files[]", "files", "file":
			if part.FileName() == "" {
				return form, Errorf(http.StatusBadRequest, CodeBadRequest, "a %s part has no file name", field)
			}
			if limits.Entries > 0 && len(form.files) >= limits.Entries {
				return form, &packages.Error{Kind: packages.TooLarge, Code: packages.CodeTooLarge,
					Message: fmt.Sprintf("the upload holds more than %d files (limit %s)", limits.Entries, packages.EntriesSetting)}
			}
			src := io.Reader(part)
			if limits.Upload > 0 {
				src = io.LimitReader(part, limits.Upload-offset+1)
			}
			n, err := io.Copy(spool, src)
			if err != nil {
				return form, uploadReadError(err, limits)
			}
			if limits.Upload > 0 && offset+n > limits.Upload {
				return form, packages.UploadTooLarge(limits.Upload)
			}
			form.files = append(form.files, filemanager.UploadFile{Name: part.FileName(), Data: io.NewSectionReader(spool, offset, n), Size: n})
			offset += n
		default:
			return form, Errorf(http.StatusBadRequest, CodeBadRequest, "unknown form field %q; send path, files[] and paths[]", field)
		}
		part.Close()
	}
	if !seenPath {
		return form, Errorf(http.StatusBadRequest, CodeBadRequest, "the form has no path field naming the destination folder")
	}
	if len(names) > 0 {
		if len(names) != len(form.files) {
			return form, Errorf(http.StatusBadRequest, CodeBadRequest, "paths[] has %d entries for %d files; send one per file, or none", len(names), len(form.files))
		}
		for i, n := range names {
			if n != "" {
				form.files[i].Name = n
			}
		}
	}
	return form, nil
}

// formValue reads a text field of the form, up to the length of a path.
func formValue(part io.Reader, field string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, 4097))
	if err != nil {
		return "", err
	}
	if len(b) > 4096 {
		return "", Errorf(http.StatusBadRequest, CodeBadRequest, "field %s is longer than 4096 bytes", field)
	}
	return string(b), nil
}

// uploadReadError reports a failure reading the form: over the body limit, or malformed.
func uploadReadError(err error, limits packages.Limits) error {
	var tooLarge *http.MaxBytesError
	var apiErr *Error
	switch {
	case errors.As(err, &apiErr):
		return err
	case errors.As(err, &tooLarge):
		return packages.UploadTooLarge(limits.Upload)
	}
	return Errorf(http.StatusBadRequest, CodeBadRequest, "the multipart form is malformed: %v", err)
}
