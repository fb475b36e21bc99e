package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
)

// Option adjusts a request.
type Option func(*http.Request) error

// WithKey sends key in X-API-Key.
func WithKey(key string) Option { return WithHeader("X-API-Key", key) }

// WithBearer sends key as Authorization: Bearer.
func WithBearer(key string) Option { return WithHeader("Authorization", "Bearer "+key) }

// WithCookie sends a cookie.
func WithCookie(name, value string) Option {
	return func(r *http.Request) error {
		r.AddCookie(&http.Cookie{Name: name, Value: value})
		return nil
	}
}

// WithHeader sets a request header.
func WithHeader(name, value string) Option {
	return func(r *http.Request) error {
		r.Header.Set(name, value)
		return nil
	}
}

// WithOrigin sends Origin: the server's own origin when origin is "", else origin.
func WithOrigin(origin string) Option {
	return func(r *http.Request) error {
		if origin == "" {
			origin = r.URL.Scheme + "://" + r.URL.Host
		}
		r.Header.Set("Origin", origin)
		return nil
	}
}

// WithJSON sends v as a JSON body.
func WithJSON(v any) Option {
	return func(r *http.Request) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		setBody(r, "application/json", b)
		return nil
	}
}

// WithBody sends raw bytes with a content type.
func WithBody(contentType string, body []byte) Option {
	return func(r *http.Request) error {
		setBody(r, contentType, body)
		return nil
	}
}

// FormFile is one file part of a multipart body.
type FormFile struct {
	Field, Filename string
	Data            []byte
}

// WithMultipart sends a multipart/form-data body with the given fields and files.
func WithMultipart(fields map[string]string, files ...FormFile) Option {
	return func(r *http.Request) error {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range fields {
			if err := mw.WriteField(k, v); err != nil {
				return err
			}
		}
		for _, f := range files {
			part, err := mw.CreateFormFile(f.Field, f.Filename)
			if err != nil {
				return err
			}
			if _, err := part.Write(f.Data); err != nil {
				return err
			}
		}
		if err := mw.Close(); err != nil {
			return err
		}
		setBody(r, mw.FormDataContentType(), buf.Bytes())
		return nil
	}
}

func setBody(r *http.Request, contentType string, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.Header.Set("Content-Type", contentType)
}

// Response is a completed response with its body read.
type Response struct {
	Proto  string // e.g. HTTP/1.1
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// ErrorCode returns the code of an error envelope body, or "".
func (r *Response) ErrorCode() string {
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &env)
	return env.Error.Code
}

func (r *Response) String() string {
	return fmt.Sprintf("%d %s", r.Status, strings.TrimSpace(string(r.Body)))
}

// Send performs a request and validates the response against the OpenAPI document; it is
// safe for concurrent use and reports failures as errors.
func (s *Server) Send(method, path string, opts ...Option) (*Response, error) {
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		return nil, err
	}
	for _, opt := range opts {
		if err := opt(req); err != nil {
			return nil, err
		}
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := &Response{Proto: resp.Proto, Status: resp.StatusCode, Header: resp.Header, Body: body}
	if s.Validator != nil {
		if err := s.Validator.Check(req, resp.StatusCode, resp.Header, body); err != nil {
			return out, fmt.Errorf("response breaks the OpenAPI contract: %w", err)
		}
	}
	return out, nil
}

// Do performs a request from the test goroutine, failing the test on a transport error or a
// response that breaks the OpenAPI contract.
func (s *Server) Do(method, path string, opts ...Option) *Response {
	s.tb.Helper()
	resp, err := s.Send(method, path, opts...)
	if err != nil && resp == nil {
		s.tb.Fatalf("%s %s: %v", method, path, err)
	}
	if err != nil {
		s.tb.Errorf("%s %s: %v", method, path, err)
	}
	return resp
}

// Get is Do with GET.
func (s *Server) Get(path string, opts ...Option) *Response {
	s.tb.Helper()
	return s.Do(http.MethodGet, path, opts...)
}

// Upload posts one archive as the multipart field "file", as the CLI and cpanel do.
func (s *Server) Upload(path, filename string, data []byte, opts ...Option) *Response {
	s.tb.Helper()
	return s.Do(http.MethodPost, path, append([]Option{WithOrigin(""), WithMultipart(nil, FormFile{"file", filename, data})}, opts...)...)
}

// PathEscape escapes one path segment, e.g. a scoped plugin name.
func PathEscape(s string) string { return url.PathEscape(s) }
