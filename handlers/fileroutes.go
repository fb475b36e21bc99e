package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// fileSurface is one of the two file managers of the API.
type fileSurface struct {
	name                  string // path segment and operationId prefix: "workers" or "plugins"
	noun                  string // "worker" or "plugin"
	catalog               func(a *filesAPI) *packages.Catalog
	read, install, remove string // permissions
	layout                string // the writable part of the layout, for descriptions
}

var fileSurfaces = []fileSurface{
	{
		name: "workers", noun: "worker", catalog: func(a *filesAPI) *packages.Catalog { return a.workers },
		read: keystore.WorkersRead, install: keystore.WorkersInstall, remove: keystore.WorkersRemove,
		layout: "Writes land strictly inside a version folder (<root>/<name>/<version>/… or <root>/@scope/<name>/<version>/…); name, scope and version folders are never created, renamed, moved or deleted here.",
	},
	{
		name: "plugins", noun: "plugin", catalog: func(a *filesAPI) *packages.Catalog { return a.plugins },
		read: keystore.PluginsRead, install: keystore.PluginsInstall, remove: keystore.PluginsRemove,
		layout: "Writes land strictly inside a plugin folder (<root>/<name>/… or <root>/@scope/<name>/…); the plugin folder itself is never renamed, moved or deleted here (use DELETE plugins/{name}).",
	},
}

// maxFileBatch is the most paths one batch request may name.
const maxFileBatch = 1000

// fileZipTooLarge is the refusal of a zip download over its limits, sent before the zip starts.
const fileZipTooLarge = "The zip would hold more than max_archive_entries files and folders or max_unpacked_size bytes of files (PAYLOAD_TOO_LARGE, naming the limit)"

// filesAPI serves the file managers of the workers and of the plugins.
type filesAPI struct {
	*pipeline
	workers, plugins *packages.Catalog
	// admit checks a unit's metadata that a write leaves changed, as an upload of it would be.
	admit     func(p keystore.Principal, c *packages.Catalog, md packages.Metadata) error
	clustered bool // cluster mode: the files are read-only here, the desired state is shared
}

// fileRoutes are the file manager's routes under workers/files and plugins/files.
func (a *filesAPI) fileRoutes() []route {
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
	// A write that creates, changes or removes a metadata file at the top of a version or
	// plugin folder is admitted as an upload of the result would be.
	fileAdmitBad      = "; a manifest write leaving an invalid manifest or a reserved name (INVALID_MANIFEST, INVALID_PACKAGE_NAME)"
	fileAdmitDenied   = "; a manifest write the key could not upload: a process worker where process_workers does not allow it (PROCESS_WORKERS_DISABLED), a WebAssembly worker where wasm_workers does not (WASM_WORKERS_DISABLED), plugin hooks, extra handlers or a base outside the scope with a namespaced key (NAMESPACE_DENIED), a handler, matcher, root or placeholder plugins may not use (PLUGIN_NOT_ALLOWED)"
	fileAdmitConflict = "; a manifest write whose worker name or plugin base another unit serves (WORKER_CONFLICT, PLUGIN_CONFLICT)"
)

// fileSurfaceRoutes are the routes of one surface.
func (a *filesAPI) fileSurfaceRoutes(s fileSurface) []route {
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
			" folders (" + s.noun + "_dirs). " + s.layout + " Built-in roots are read-only, and in cluster mode uploaded ones too (CLUSTER_READ_ONLY: deploy a new version); a namespace-restricted key reaches only @scope folders of its namespaces."
	}
	routes := []route{
		{
			method: "GET", path: base + "list", id: id("List"), tag: tag, permission: s.read,
			summary:     "List a " + s.noun + " folder",
			description: desc("Lists a folder; path \"\" (or none) lists the roots, built-in ones included (visibility built-in). A restricted key sees only the @scope folders of its namespaces in a root."),
			params:      pathParam(false, "the folder; \"\" for the roots"),
			responses: []response{
				{status: http.StatusOK, description: "The folder's entries", body: api.FileListResponse{}},
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
			request:     jsonBody(api.FilePathRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Created", body: api.FilePathResponse{}},
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
			request:     jsonBody(api.FilePathRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Deleted", body: api.Success{}},
				errorResponse(http.StatusBadRequest, fileBadPath+fileBadBody+fileAdmitBad),
				errorResponse(http.StatusForbidden, fileWriteDenied+fileAdmitDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusConflict, "Removing a manifest uncovers one whose worker name or plugin base another unit serves (WORKER_CONFLICT, PLUGIN_CONFLICT)"),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileDelete(s),
		},
		{
			method: "POST", path: base + "rename", id: id("Rename"), tag: tag, permission: s.install,
			summary:     "Rename a file or folder of a " + s.noun,
			description: desc("Renames in place; newName is a single name."),
			request:     jsonBody(api.FileRenameRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Renamed; data.path is the new path", body: api.FilePathResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a newName that is not a single name"+fileBadBody+fileAdmitBad),
				errorResponse(http.StatusForbidden, fileWriteDenied+fileAdmitDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusConflict, fileExists+fileAdmitConflict),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileRename(s),
		},
		{
			method: "POST", path: base + "move", id: id("Move"), tag: tag, permission: s.install,
			summary:     "Move a file or folder of a " + s.noun,
			description: desc("Moves path into the folder destPath, within one root; both paths obey the policy and the namespaces."),
			request:     jsonBody(api.FileMoveRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Moved; data.path is the new path", body: api.FilePathResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a move across roots or into itself"+fileBadBody+fileAdmitBad),
				errorResponse(http.StatusForbidden, fileWriteDenied+fileAdmitDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
				errorResponse(http.StatusConflict, fileExists+fileAdmitConflict),
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
			request: &request{contentType: "multipart/form-data", body: api.FileUploadForm{}},
			responses: []response{
				{status: http.StatusOK, description: "Written", body: api.FileUploadResponse{}},
				errorResponse(http.StatusBadRequest, fileBadPath+"; a zip entry leaving its folder (PATH_TRAVERSAL); a corrupt zip (INVALID_ARCHIVE); a malformed form (BAD_REQUEST)"+fileAdmitBad),
				errorResponse(http.StatusForbidden, fileWriteDenied+fileAdmitDenied),
				errorResponse(http.StatusNotFound, "The version or plugin folder does not exist (FILE_NOT_FOUND)"),
				errorResponse(http.StatusConflict, fileExists+fileAdmitConflict),
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
				{status: http.StatusOK, description: "Nothing to drop", body: api.Success{}},
				errorResponse(http.StatusBadRequest, fileBadPath),
				errorResponse(http.StatusForbidden, fileReadDenied),
				errorResponse(http.StatusNotFound, fileNotFound),
			},
			handle: a.fileRefresh(s),
		},
		{
			method: "POST", path: base + "refresh", id: id("RefreshPost"), tag: tag, permission: s.read,
			summary:     "Refresh a " + s.noun + " folder",
			description: desc("As GET; the body {path?} may be empty, and then the query's path is read."),
			params:      pathParam(false, "the folder, when the body is empty; optional"),
			request:     jsonBody(api.FileRefreshRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Nothing to drop", body: api.Success{}},
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
				errorResponse(http.StatusRequestEntityTooLarge, fileZipTooLarge),
			},
			handle: a.fileDownload(s),
		},
		{
			method: "POST", path: base + "delete-batch", id: id("DeleteBatch"), tag: tag, permission: s.remove,
			summary:     "Delete several files or folders of a " + s.noun,
			description: desc(fmt.Sprintf("Deletes each path as DELETE delete would; the paths that fail are listed in errors and the others are deleted. At most %d paths.", maxFileBatch)),
			request:     jsonBody(api.FileBatchRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Done, with the paths that failed", body: api.FileBatchResponse{}},
				errorResponse(http.StatusBadRequest, "No paths, or too many (BAD_REQUEST)"+fileBadBody),
				errorResponse(http.StatusRequestEntityTooLarge, fileBodyTooLarge),
			},
			handle: a.fileDeleteBatch(s),
		},
		{
			method: "POST", path: base + "move-batch", id: id("MoveBatch"), tag: tag, permission: s.install,
			summary:     "Move several files or folders of a " + s.noun,
			description: desc(fmt.Sprintf("Moves each path into destPath as move would; the paths that fail are listed in errors and the others are moved. At most %d paths.", maxFileBatch)),
			request:     jsonBody(api.FileMoveBatchRequest{}),
			responses: []response{
				{status: http.StatusOK, description: "Done, with the paths that failed", body: api.FileBatchResponse{}},
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
			description: desc("A zip of the paths that can be read, each under its base name (\"name (2)\" when two share one); the others are left out. A path named twice, or inside a folder the batch names too, is stored once."),
			params: []openapi.Parameter{{Name: "paths", In: "query", Required: true, Schema: &openapi.Schema{Type: "string"},
				Description: fmt.Sprintf("comma-separated paths (the parameter may also be repeated); at most %d", maxFileBatch)}},
			responses: []response{
				{status: http.StatusOK, description: "The zip", content: zipOnly},
				errorResponse(http.StatusBadRequest, "No paths, or too many (BAD_REQUEST)"),
				errorResponse(http.StatusNotFound, "None of the paths can be read (FILE_NOT_FOUND); the message says why for each"),
				errorResponse(http.StatusRequestEntityTooLarge, fileZipTooLarge),
			},
			handle: a.fileDownloadBatch(s),
		},
	}
	for i, rt := range routes {
		switch {
		case !mutating(rt.method) || strings.HasSuffix(rt.path, "/refresh"):
		case strings.HasSuffix(rt.path, "/delete-batch"):
			routes[i].description += " In cluster mode each path of an uploaded unit fails with CLUSTER_READ_ONLY."
		default:
			routes[i].responses = append(routes[i].responses, errorResponse(http.StatusConflict, clusterReadOnlyDoc))
		}
	}
	return routes
}
