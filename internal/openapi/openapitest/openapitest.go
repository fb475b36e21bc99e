// Package openapitest checks a published OpenAPI 3.1 document with a real validator
// (kin-openapi) and validates HTTP responses against it. Tests only: it keeps the validator
// out of the runtime binary.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Validator validates responses against one OpenAPI document.
type Validator struct {
	doc *openapi3.T
	// apiPrefix is the API path; responses under it that match no documented path must be
	// the error envelope.
	apiPrefix string
	// base is the path of the document's server URL, in front of every documented path.
	base string
}

// New loads and validates an OpenAPI 3.1 document. apiPrefix is the API path (e.g. "/api").
func New(doc []byte, apiPrefix string) (*Validator, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("loading OpenAPI document: %w", err)
	}
	if !t.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("document declares OpenAPI %q, want 3.1", t.OpenAPI)
	}
	if err := t.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("invalid OpenAPI document: %w", err)
	}
	v := &Validator{doc: t, apiPrefix: apiPrefix}
	if len(t.Servers) > 0 {
		u, err := url.Parse(t.Servers[0].URL)
		if err != nil {
			return nil, fmt.Errorf("server URL %q: %w", t.Servers[0].URL, err)
		}
		v.base = strings.TrimSuffix(u.Path, "/")
	}
	return v, nil
}

// Document returns the loaded document.
func (v *Validator) Document() *openapi3.T { return v.doc }

// Check validates one exchange: the response status must be documented for the operation, its
// content type must be a documented one, and a JSON body must match the schema. Responses for
// undocumented paths under the API must be the error envelope. Every response must carry
// X-Request-Id.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if header.Get("X-Request-Id") == "" {
		return fmt.Errorf("%s %s: %d response has no X-Request-Id", req.Method, req.URL.Path, status)
	}
	route, params := v.find(req)
	if route == nil {
		if v.apiPrefix != "" && (req.URL.Path == v.apiPrefix || strings.HasPrefix(req.URL.Path, v.apiPrefix+"/")) {
			if status < 400 {
				return fmt.Errorf("%s %s: undocumented API path answered %d", req.Method, req.URL.Path, status)
			}
			return CheckEnvelope(header, body)
		}
		return nil
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	input.SetBodyBytes(body)
	// A part of a body (206) is not a body of the schema.
	if status == http.StatusNotModified || status == http.StatusPartialContent || req.Method == http.MethodHead {
		input.Options.ExcludeResponseBody = true
	}
	documented := route.Operation.Responses.Status(status)
	if documented == nil || documented.Value == nil {
		return fmt.Errorf("%s %s: status %d is not documented", req.Method, route.Path, status)
	}
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if len(documented.Value.Content) == 0 {
		if len(body) > 0 && req.Method != http.MethodHead {
			return fmt.Errorf("%s %s: status %d is documented without a body, but has %d bytes", req.Method, route.Path, status, len(body))
		}
	} else if !input.Options.ExcludeResponseBody && mediaType != "application/json" {
		// kin-openapi decodes JSON-like bodies only; for others the content type is the contract.
		if documented.Value.Content.Get(mediaType) == nil {
			return fmt.Errorf("%s %s: content type %q is not documented for status %d", req.Method, route.Path, mediaType, status)
		}
		input.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, route.Path, err)
	}
	// An error documented with JSON is the envelope; one documented without a body (412 from
	// http.ServeContent keeps the file's content type) has none to check.
	if status >= 400 && documented.Value.Content.Get("application/json") != nil {
		return CheckEnvelope(header, body)
	}
	return nil
}

// CheckEnvelope checks that a body is exactly the error envelope with a non-empty code and
// message.
func CheckEnvelope(header http.Header, body []byte) error {
	if ct, _, _ := mime.ParseMediaType(header.Get("Content-Type")); ct != "application/json" {
		return fmt.Errorf("error response has content type %q, want application/json", header.Get("Content-Type"))
	}
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
		return fmt.Errorf("error response is not the envelope {error:{code,message}}: %s", body)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("error response has data after the envelope: %s", body)
	}
	return nil
}

// find returns the documented operation for a request, preferring the path template with the
// most literal segments, as ServeMux does. Documented paths are below the server URL's path.
func (v *Validator) find(req *http.Request) (*routers.Route, map[string]string) {
	p, ok := strings.CutPrefix(req.URL.EscapedPath(), v.base)
	if !ok || (v.base != "" && !strings.HasPrefix(p, "/")) {
		return nil, nil
	}
	reqSegs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var best *routers.Route
	var bestParams map[string]string
	bestLiterals := -1
	for tmpl, item := range v.doc.Paths.Map() {
		op := item.GetOperation(method)
		if op == nil {
			continue
		}
		params, literals, ok := match(strings.Split(tmpl, "/"), reqSegs)
		if !ok || literals <= bestLiterals {
			continue
		}
		best = &routers.Route{Spec: v.doc, Path: tmpl, PathItem: item, Method: method, Operation: op}
		bestParams, bestLiterals = params, literals
	}
	return best, bestParams
}

func match(tmpl, segs []string) (map[string]string, int, bool) {
	if len(tmpl) != len(segs) {
		return nil, 0, false
	}
	params := map[string]string{}
	literals := 0
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if segs[i] == "" {
				return nil, 0, false
			}
			params[t[1:len(t)-1]] = segs[i]
			continue
		}
		if t != segs[i] {
			return nil, 0, false
		}
		literals++
	}
	return params, literals, true
}
