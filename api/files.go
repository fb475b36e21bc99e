package api

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
