// Package client speaks the runtime's management API over HTTP, for the command-line client
// and other programs. It holds no server state: it finds the API path through
// /.well-known/runtime, sends the key and the Origin header the CSRF rule asks for, and turns
// the error envelope into an *Error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-runtime/runtime/api"
)

// Client is a connection to one runtime.
type Client struct {
	base   *url.URL // the runtime's base URL, its mount path included
	origin string   // scheme://host of base, sent as Origin on changes
	key    string
	http   *http.Client
	api    string // the API path, from discovery
	disc   api.Discovery
}

// New returns a client of the runtime at baseURL (http or https, with the mount path when the
// runtime is mounted below one) that authenticates with key ("" for none).
func New(baseURL, key string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the runtime URL %q is not an http(s) URL such as https://runtime.example.com", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("the runtime URL %q has a query, a fragment or a user: give scheme, host and path only", baseURL)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = dialLocalhost(transport.DialContext)
	return &Client{base: u, origin: u.Scheme + "://" + u.Host, key: key,
		http: &http.Client{Transport: transport}}, nil
}

// dialLocalhost sends names under .localhost to the loopback address, as RFC 6761 asks and as
// browsers and curl do, so that a runtime serving workers at apps.localhost is reachable
// here too; Go's resolver would ask DNS, which does not know them.
func dialLocalhost(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(strings.ToLower(host), ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return dial(ctx, network, addr)
	}
}

// Error is a refusal from the runtime: the envelope's code and message, the status and the
// request id to quote.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *Error) Error() string {
	if e.RequestID != "" {
		return fmt.Sprintf("%s: %s (request id %s)", e.Code, e.Message, e.RequestID)
	}
	return e.Code + ": " + e.Message
}

// UnreachableError is a request that got no answer from the runtime.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the runtime at %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// BaseURL is the runtime's base URL as given.
func (c *Client) BaseURL() string { return c.base.String() }

// Discover reads the discovery document once; later calls return it.
func (c *Client) Discover(ctx context.Context) (api.Discovery, error) {
	if c.api != "" {
		return c.disc, nil
	}
	var d api.Discovery
	if err := c.send(ctx, http.MethodGet, c.base.String()+api.DiscoveryPath, nil, "", &d); err != nil {
		return api.Discovery{}, err
	}
	if !strings.HasPrefix(d.API, "/") {
		return api.Discovery{}, fmt.Errorf("the discovery document at %s names no API path; is this a runtime?", c.base)
	}
	c.api, c.disc = d.API, d
	return d, nil
}

// URL returns the absolute URL of a path on the runtime's origin, such as an API path from
// discovery or a worker's path.
func (c *Client) URL(path string) string { return c.origin + path }

// JSON sends a request to an API path (e.g. "/workers") with in as its JSON body (nil for
// none) and decodes the answer into out (nil to discard it).
func (c *Client) JSON(ctx context.Context, method, path string, in, out any) error {
	if _, err := c.Discover(ctx); err != nil {
		return err
	}
	var body io.Reader
	contentType := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, contentType = bytes.NewReader(data), "application/json"
	}
	return c.send(ctx, method, c.URL(c.api+path), body, contentType, out)
}

// Upload sends the archive read from r (size bytes) as the multipart field "file" to an API
// path, reporting the bytes sent through progress (which may be nil), and decodes the answer
// into out.
func (c *Client) Upload(ctx context.Context, path, filename string, r io.Reader, size int64, progress func(sent int64), out any) error {
	if _, err := c.Discover(ctx); err != nil {
		return err
	}
	// The form is streamed: an archive is never held in memory.
	pr, pw := io.Pipe()
	form := multipart.NewWriter(pw)
	go func() {
		part, err := form.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(part, &counter{r: r, sent: progress})
		}
		if err == nil {
			err = form.Close()
		}
		pw.CloseWithError(err)
	}()
	return c.send(ctx, http.MethodPost, c.URL(c.api+path), pr, form.FormDataContentType(), out)
}

// counter reports the bytes read through it.
type counter struct {
	r    io.Reader
	n    int64
	sent func(int64)
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.sent != nil && n > 0 {
		c.sent(c.n)
	}
	return n, err
}

// Check requests url, a worker's say, without the key, and returns the answer as an *Error
// when its status is 500 or more (the runtime's envelope when it wrote one: a worker that could
// not start, crashed or did not answer in time); any other answer is nil.
func (c *Client) Check(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &UnreachableError{URL: url, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		return readError(resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// Stream opens an API path whose answer is read as it comes (Server-Sent Events); the caller
// closes the body.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	if _, err := c.Discover(ctx); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodGet, c.URL(c.api+path), nil, "")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp.Body, nil
}

func (c *Client) do(ctx context.Context, method, url string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "runtime-cli")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.key != "" {
		req.Header.Set("X-API-Key", c.key)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Origin", c.origin)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreachableError{URL: url, Err: err}
	}
	return resp, nil
}

func (c *Client) send(ctx context.Context, method, url string, body io.Reader, contentType string, out any) error {
	resp, err := c.do(ctx, method, url, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		data, err := io.ReadAll(resp.Body)
		*raw = data
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, url, err)
	}
	return nil
}

// readError turns an error answer into an *Error, from the envelope when it has one.
func readError(resp *http.Response) error {
	var env api.Envelope
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	if json.Unmarshal(data, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	} else {
		e.Code, e.Message = fmt.Sprintf("HTTP_%d", resp.StatusCode), strings.TrimSpace(http.StatusText(resp.StatusCode)+" "+string(bytes.TrimSpace(data)))
	}
	return e
}
