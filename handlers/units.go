package handlers

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of uploads.
const (
	CodeNoFileProvided = "NO_FILE_PROVIDED"
)

// UploadForm is the multipart body of an upload.
type UploadForm struct {
	File string `json:"file" format:"binary" doc:"the archive: .tgz, .tar.gz or .zip"`
}

// InstalledUnit describes an install.
type InstalledUnit struct {
	Name        string `json:"name"`
	Version     string `json:"version" doc:"the manifest version; latest when none is declared"`
	InstalledAt string `json:"installedAt" doc:"absolute install folder"`
	SHA256      string `json:"sha256" doc:"hex digest of the uploaded archive"`
	Files       int    `json:"files" doc:"regular files unpacked"`
	Bytes       int64  `json:"bytes" doc:"bytes unpacked"`
}

// uploadErrors documents what an upload can answer besides success.
func uploadErrors(noun string) []response {
	upper := strings.ToUpper(noun)
	return []response{
		errorResponse(http.StatusBadRequest, "NO_FILE_PROVIDED, INVALID_FILE_TYPE, INVALID_ARCHIVE, PATH_TRAVERSAL, MISSING_PACKAGE_NAME, INVALID_PACKAGE_NAME, INVALID_PACKAGE_VERSION, INVALID_MANIFEST or NO_"+upper+"_DIRS"),
		errorResponse(http.StatusForbidden, "The package's scope is outside the key's namespaces (NAMESPACE_DENIED)"),
		errorResponse(http.StatusConflict, "A folder earlier in the list already provides this name ("+upper+"_CONFLICT)"),
		errorResponse(http.StatusRequestEntityTooLarge, "Over max_upload_size, max_unpacked_size or max_archive_entries (PAYLOAD_TOO_LARGE, naming the limit)"),
	}
}

// install reads the multipart field "file" of an upload and installs it in c; the package
// must lie within the caller's namespaces and must not take a reserved name.
func (a *API) install(w http.ResponseWriter, r *http.Request, c *packages.Catalog) (packages.Installed, error) {
	p := principalOf(r.Context())
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "multipart/form-data" {
		return packages.Installed{}, Errorf(http.StatusBadRequest, CodeNoFileProvided,
			"send the archive as multipart/form-data in the field file (curl -F file=@app.tgz)")
	}
	// Room for the multipart framing around the archive; the archive itself is bounded exactly
	// by the catalog.
	limit := c.Limits().Upload
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return packages.Installed{}, Errorf(http.StatusBadRequest, CodeNoFileProvided, "the multipart body is malformed: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return packages.Installed{}, Errorf(http.StatusBadRequest, CodeNoFileProvided, "no file in the upload; send it in the multipart field file")
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return packages.Installed{}, packageError(packages.UploadTooLarge(limit))
		}
		if err != nil {
			return packages.Installed{}, Errorf(http.StatusBadRequest, CodeNoFileProvided, "the multipart body is malformed: %v", err)
		}
		if part.FormName() != "file" || part.FileName() == "" {
			part.Close()
			continue
		}
		installed, err := c.Install(part.FileName(), bodyReader{part, limit}, func(md packages.Metadata) error {
			if err := authorizeUnit(p, md.Name); err != nil {
				return err
			}
			return a.checkReserved(md.Name)
		})
		part.Close()
		return installed, packageError(err)
	}
}

// bodyReader turns the request body's size error into the upload limit's error.
type bodyReader struct {
	r     io.Reader
	limit int64
}

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		err = packages.UploadTooLarge(b.limit)
	}
	return n, err
}

// checkReserved refuses names whose path would collide with the runtime's own: the API
// path's first segment, the cpanel and discovery.
func (a *API) checkReserved(name string) error {
	first := strings.SplitN(strings.TrimPrefix(a.opts.Prefix, "/"), "/", 2)[0]
	for _, reserved := range []string{first, "cpanel", ".well-known"} {
		if name == reserved {
			return Errorf(http.StatusBadRequest, packages.CodeInvalidName, "%q is reserved by the runtime (/%s/ is its own path); choose another name", name, name)
		}
	}
	return nil
}

// packageError maps a packages error to its HTTP status.
func packageError(err error) error {
	var pe *packages.Error
	if !errors.As(err, &pe) {
		return err
	}
	status := map[packages.Kind]int{
		packages.Invalid:   http.StatusBadRequest,
		packages.Forbidden: http.StatusForbidden,
		packages.NotFound:  http.StatusNotFound,
		packages.Conflict:  http.StatusConflict,
		packages.TooLarge:  http.StatusRequestEntityTooLarge,
	}[pe.Kind]
	return Errorf(status, pe.Code, "%s", pe.Message)
}

// act runs op, the change a request makes to a unit, audits it as action on target and
// answers body.
func (a *API) act(w http.ResponseWriter, r *http.Request, action, target string, op func() error, body any) error {
	p := principalOf(r.Context())
	if err := op(); err != nil {
		a.audit(r, action, target, "failed", &p)
		return packageError(err)
	}
	a.audit(r, action, target, "success", &p)
	writeJSON(w, http.StatusOK, body)
	return nil
}

// uploadHandler installs an upload into the catalog c returns and answers with the body
// built from the install.
func (a *API) uploadHandler(c func() *packages.Catalog, action string, body func(InstalledUnit) any) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		cat, err := catalog(c())
		if err != nil {
			return err
		}
		p := principalOf(r.Context())
		in, err := a.install(w, r, cat)
		if err != nil {
			a.audit(r, action, in.Name, "failed", &p)
			return err
		}
		a.audit(r, action, in.Name+"@"+in.Version, "success", &p)
		writeJSON(w, http.StatusOK, body(installedUnit(in)))
		return nil
	}
}

func installedUnit(in packages.Installed) InstalledUnit {
	return InstalledUnit{Name: in.Name, Version: in.Version, InstalledAt: in.Path, SHA256: in.SHA256, Files: in.Files, Bytes: in.Bytes}
}

// catalog returns c, or 503 while the runtime is starting.
func catalog(c *packages.Catalog) (*packages.Catalog, error) {
	if c == nil {
		return nil, Errorf(http.StatusServiceUnavailable, CodeNotReady, "the runtime is starting")
	}
	return c, nil
}

// visibleUnits lists the units of c the principal may see.
func visibleUnits(c *packages.Catalog, p keystore.Principal) ([]packages.Unit, error) {
	units, err := c.List()
	if err != nil {
		return nil, err
	}
	out := units[:0:0]
	for _, u := range units {
		if p.CanAccess(u.Name) {
			out = append(out, u)
		}
	}
	return out, nil
}

// unitName reads the unit name from the path values: {scope} ("_" or "@scope") and {name}
// for workers, or the URL-decoded {name} for plugins.
func unitName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if scope := r.PathValue("scope"); scope != "" {
		if scope != "_" && !strings.HasPrefix(scope, "@") {
			return "", Errorf(http.StatusBadRequest, packages.CodeInvalidName, "scope %q must be _ (no scope) or @scope", scope)
		}
		name = packages.JoinName(scope, name)
	}
	if err := packages.ValidateName(name); err != nil {
		return "", packageError(err)
	}
	return name, nil
}
