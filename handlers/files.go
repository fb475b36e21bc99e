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

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/filemanager"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// fileManager returns a surface's file manager for a request, or 503 while its catalog is
// missing. A write that leaves a unit's metadata changed is admitted with the caller's key,
// as an upload of that metadata would be.
func (a *filesAPI) fileManager(s fileSurface, r *http.Request) (*filemanager.Surface, error) {
	c, err := catalog(s.catalog(a))
	if err != nil {
		return nil, err
	}
	p := principalOf(r.Context())
	fm := filemanager.ForCatalog(c).WithAdmit(func(_ string, md packages.Metadata) error {
		return a.admit(p, c, md)
	})
	if a.clustered {
		fm.WithFrozen(clusterReadOnly)
	}
	return fm, nil
}

// fileGuard checks every path of a request against the caller's namespaces.
func fileGuard(r *http.Request) filemanager.Guard {
	p := principalOf(r.Context())
	return func(unit string) error { return authorizeUnit(p, unit) }
}

// fileMessage is why one path of a batch failed.
func fileMessage(err error) string {
	var e *envelope.Error
	if errors.As(packageError(err), &e) {
		return e.Message
	}
	return "internal error"
}

// auditFile logs one write of the file manager: "success", "denied" for a refusal by policy,
// namespace or containment, "failed" otherwise.
func (a *filesAPI) auditFile(r *http.Request, s fileSurface, op, target string, err error, extra ...zap.Field) {
	outcome := "success"
	if err != nil {
		outcome = "failed"
		var e *envelope.Error
		if errors.As(packageError(err), &e) && (e.Status == http.StatusForbidden || e.Code == packages.CodePathTraversal) {
			outcome = "denied"
		}
	}
	p := principalOf(r.Context())
	// A virtual path is <root folder>/<unit>/…: the unit's namespace is the entry's scope.
	_, unit, _ := strings.Cut(target, "/")
	a.auditScoped(r, "files."+op, target, keystore.NamespaceOf(unit), outcome, &p, append(extra, zap.String("surface", s.name))...)
}

func (a *filesAPI) fileList(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		l, err := fm.List(fileGuard(r), r.URL.Query().Get("path"))
		if err != nil {
			return packageError(err)
		}
		out := api.FileListing{Path: l.Path, Writable: l.Writable, Entries: make([]api.FileEntry, 0, len(l.Entries))}
		for _, e := range l.Entries {
			visibility := "uploaded"
			if e.BuiltIn {
				visibility = "built-in"
			}
			out.Entries = append(out.Entries, api.FileEntry{Name: e.Name, Path: e.Path, IsDirectory: e.IsDir, IsSymlink: e.IsLink,
				Size: e.Size, UpdatedAt: e.ModTime.Unix(), Visibility: visibility})
		}
		envelope.WriteJSON(w, http.StatusOK, api.FileListResponse{Success: true, Data: out})
		return nil
	}
}

// fileWrite runs one file manager change from a JSON request: decode it, make the change,
// audit it as op on the path audited names (with further fields), and answer with the body
// the change returns.
func fileWrite[R any](a *filesAPI, s fileSurface, op string, audited func(R) (string, []zap.Field), change func(*filemanager.Surface, filemanager.Guard, R) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		var req R
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		body, err := change(fm, fileGuard(r), req)
		target, extra := audited(req)
		a.auditFile(r, s, op, target, err, extra...)
		if err != nil {
			return packageError(err)
		}
		envelope.WriteJSON(w, http.StatusOK, body)
		return nil
	}
}

// auditPath names the path of a request that acts on one path, with no further fields.
func auditPath(r api.FilePathRequest) (string, []zap.Field) { return r.Path, nil }

// pathAnswer is the answer of a change that names where its result is.
func pathAnswer(loc filemanager.Location) api.FilePathResponse {
	return api.FilePathResponse{Success: true, Data: api.FilePathResult{Path: loc.Path}}
}

func (a *filesAPI) fileMkdir(s fileSurface) handlerFunc {
	return fileWrite(a, s, "mkdir", auditPath, func(fm *filemanager.Surface, g filemanager.Guard, req api.FilePathRequest) (any, error) {
		loc, err := fm.Mkdir(g, req.Path)
		return pathAnswer(loc), err
	})
}

func (a *filesAPI) fileDelete(s fileSurface) handlerFunc {
	return fileWrite(a, s, "delete", auditPath, func(fm *filemanager.Surface, g filemanager.Guard, req api.FilePathRequest) (any, error) {
		_, err := fm.Delete(g, req.Path)
		return api.Success{Success: true}, err
	})
}

func (a *filesAPI) fileRename(s fileSurface) handlerFunc {
	return fileWrite(a, s, "rename", func(r api.FileRenameRequest) (string, []zap.Field) {
		return r.Path, []zap.Field{zap.String("new_name", r.NewName)}
	}, func(fm *filemanager.Surface, g filemanager.Guard, req api.FileRenameRequest) (any, error) {
		loc, err := fm.Rename(g, req.Path, req.NewName)
		return pathAnswer(loc), err
	})
}

func (a *filesAPI) fileMove(s fileSurface) handlerFunc {
	return fileWrite(a, s, "move", func(r api.FileMoveRequest) (string, []zap.Field) {
		return r.Path, []zap.Field{zap.String("dest_path", r.DestPath)}
	}, func(fm *filemanager.Surface, g filemanager.Guard, req api.FileMoveRequest) (any, error) {
		loc, err := fm.Move(g, req.Path, req.DestPath)
		return pathAnswer(loc), err
	})
}

func (a *filesAPI) fileRefresh(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		p := r.URL.Query().Get("path")
		if r.Method == http.MethodPost && r.ContentLength != 0 {
			var req api.FileRefreshRequest
			if err := decodeJSON(w, r, &req); err != nil {
				return err
			}
			p = req.Path
		}
		if err := fm.Check(fileGuard(r), p); err != nil {
			return packageError(err)
		}
		envelope.WriteJSON(w, http.StatusOK, api.Success{Success: true})
		return nil
	}
}

// checkBatch refuses an empty or oversized batch.
func checkBatch(paths []string) error {
	switch {
	case len(paths) == 0:
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "paths is empty; name at least one path")
	case len(paths) > maxFileBatch:
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "%d paths is more than the %d one batch may hold", len(paths), maxFileBatch)
	}
	return nil
}

func (a *filesAPI) fileDeleteBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		var req api.FileBatchRequest
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		if err := checkBatch(req.Paths); err != nil {
			return err
		}
		g := fileGuard(r)
		out := api.FileBatchResponse{Success: true}
		var firstErr error
		for _, p := range req.Paths {
			if _, err := fm.Delete(g, p); err != nil {
				out.Errors = append(out.Errors, p+": "+fileMessage(err))
				firstErr = cmpErr(firstErr, err)
			}
		}
		a.auditFile(r, s, "delete-batch", strings.Join(req.Paths, ", "), firstErr, zap.Int("failed", len(out.Errors)))
		envelope.WriteJSON(w, http.StatusOK, out)
		return nil
	}
}

func (a *filesAPI) fileMoveBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		var req api.FileMoveBatchRequest
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
		if err := checkBatch(req.Paths); err != nil {
			return err
		}
		g := fileGuard(r)
		// A destination that cannot take anything fails the whole batch at once.
		if err := fm.CheckDestination(g, req.DestPath); err != nil {
			a.auditFile(r, s, "move-batch", strings.Join(req.Paths, ", "), err, zap.String("dest_path", req.DestPath))
			return packageError(err)
		}
		out := api.FileBatchResponse{Success: true}
		var firstErr error
		for _, p := range req.Paths {
			if _, err := fm.Move(g, p, req.DestPath); err != nil {
				out.Errors = append(out.Errors, p+": "+fileMessage(err))
				firstErr = cmpErr(firstErr, err)
			}
		}
		a.auditFile(r, s, "move-batch", strings.Join(req.Paths, ", "), firstErr,
			zap.String("dest_path", req.DestPath), zap.Int("failed", len(out.Errors)))
		envelope.WriteJSON(w, http.StatusOK, out)
		return nil
	}
}

// cmpErr keeps the error a batch is audited with: a refusal (denied) wins over any other.
func cmpErr(kept, err error) error {
	var e *envelope.Error
	if kept == nil || errors.As(packageError(err), &e) && e.Status == http.StatusForbidden {
		return err
	}
	return kept
}

func (a *filesAPI) fileDownload(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		d, err := fm.Open(fileGuard(r), r.URL.Query().Get("path"), s.catalog(a).Limits())
		if err != nil {
			return packageError(err)
		}
		defer d.Close()
		return a.sendDownload(w, r, d)
	}
}

func (a *filesAPI) fileDownloadBatch(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
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
		d, failed, err := fm.OpenBatch(fileGuard(r), paths, s.catalog(a).Limits())
		if err != nil {
			return packageError(err)
		}
		if d == nil {
			var why []string
			for _, f := range failed {
				why = append(why, f.Path+": "+fileMessage(f.Err))
			}
			return envelope.Errorf(http.StatusNotFound, filemanager.CodeNotFound, "none of the paths can be downloaded: %s", strings.Join(why, "; "))
		}
		defer d.Close()
		return a.sendDownload(w, r, d)
	}
}

// sendDownload streams a download. The headers go out with the first byte, so a failure
// before it is still an error envelope; a failure after it aborts the response, so the client
// sees a broken transfer rather than a truncated file that looks complete.
func (a *filesAPI) sendDownload(w http.ResponseWriter, r *http.Request, d *filemanager.Download) error {
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
	a.logger.Warn("download failed after it started", zap.String("request_id", trace.RequestID(r.Context())), zap.Error(err))
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
func (a *filesAPI) fileUpload(s fileSurface) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		fm, err := a.fileManager(s, r)
		if err != nil {
			return err
		}
		limits := s.catalog(a).Limits()
		up, err := readMultipart(w, r, limits.Upload, envelope.CodeBadRequest, "send multipart/form-data with the fields path, files[] and optionally paths[]")
		if err != nil {
			return err
		}
		spool, err := os.CreateTemp("", "runtime-files-*")
		if err != nil {
			return err
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		form, err := readUploadForm(up, spool, limits)
		if err != nil {
			return packageError(err)
		}
		res, err := fm.Upload(fileGuard(r), form.dest, form.files, limits)
		a.auditFile(r, s, "upload", form.dest, err, zap.Int("files", len(form.files)))
		if err != nil {
			return packageError(err)
		}
		envelope.WriteJSON(w, http.StatusOK, api.FileUploadResponse{Success: true, Data: api.FileUploadResult{Path: res.Path, Files: res.Files, Bytes: res.Bytes}})
		return nil
	}
}

// uploadForm is a read upload form.
type uploadForm struct {
	dest  string
	files []filemanager.UploadFile
}

// readUploadForm reads the parts of an upload: path, files[] (spooled into spool) and
// paths[]. Refusals are *packages.Error or *envelope.Error values.
func readUploadForm(up *multipartUpload, spool *os.File, limits packages.Limits) (uploadForm, error) {
	var form uploadForm
	var names []string
	var offset int64
	seenPath := false
	for {
		part, err := up.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return form, err
		}
		switch field := part.FormName(); field {
		case "path":
			if form.dest, err = formValue(part, field); err != nil {
				return form, up.readError(err)
			}
			seenPath = true
		case "paths[]", "paths":
			v, err := formValue(part, field)
			if err != nil {
				return form, up.readError(err)
			}
			names = append(names, v)
		case "files[]", "files", "file":
			if part.FileName() == "" {
				return form, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "a %s part has no file name", field)
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
				return form, up.readError(err)
			}
			if limits.Upload > 0 && offset+n > limits.Upload {
				return form, packages.UploadTooLarge(limits.Upload)
			}
			form.files = append(form.files, filemanager.UploadFile{Name: part.FileName(), Data: io.NewSectionReader(spool, offset, n), Size: n})
			offset += n
		default:
			return form, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown form field %q; send path, files[] and paths[]", field)
		}
		part.Close()
	}
	if !seenPath {
		return form, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "the form has no path field naming the destination folder")
	}
	if len(names) > 0 {
		if len(names) != len(form.files) {
			return form, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "paths[] has %d entries for %d files; send one per file, or none", len(names), len(form.files))
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
		return "", envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "field %s is longer than 4096 bytes", field)
	}
	return string(b), nil
}
