package handlers

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/trace"
)

// route is one API operation: its handler and its documentation together, so that a route
// cannot exist without its documentation.
type route struct {
	method string
	// path is relative to the API path ("/health"), or absolute under /.well-known/.
	// Wildcards use ServeMux syntax ("/keys/{id}").
	path        string
	id          string // operationId
	summary     string
	description string
	tag         string
	// public routes need no credential; others need one, holding permission when it is set.
	public     bool
	permission string
	// probe marks a health probe: a fixed public body for load balancers, the most frequent
	// request, answered without the headers that guard other answers (nosniff, no-store):
	// there is nothing in it to sniff or to keep from a cache.
	probe bool
	// immediate marks a route answered at once while the runtime starts (the liveness and
	// readiness probes, whose answer is about the start); every other waits for the start.
	immediate bool
	// file marks an answer served with http.ServeContent (a ui.File): it answers conditional
	// and range requests too.
	file      bool
	params    []openapi.Parameter
	request   *request
	responses []response
	handle    handlerFunc
}

// request documents a request body.
type request struct {
	contentType string
	body        any // a value whose type gives the schema
}

// response documents one response status.
type response struct {
	status      int
	description string
	body        any                        // a value whose type gives the JSON schema; nil for none
	alt         []any                      // other bodies the status may carry (anyOf)
	content     map[string]*openapi.Schema // non-JSON bodies by content type
	headers     map[string]openapi.Header  // response headers besides X-Request-Id
}

// errorResponse documents an error status answered with the envelope.
func errorResponse(status int, description string) response {
	return response{status: status, description: description, body: api.Envelope{}}
}

// routes is the route table of the API, assembled from the resources' routes; its order is the
// OpenAPI document's.
func (a *API) routes() []route {
	return slices.Concat(
		a.health.healthRoutes(),
		a.sessions.sessionRoutes(),
		a.apiKeys.keyRoutes(),
		a.units.workerRoutes(),
		a.domains.domainRoutes(),
		a.traffic.trafficRoutes(),
		a.cron.cronRoutes(),
		a.pool.poolRoutes(),
		a.secrets.secretRoutes(),
		a.stats.statsRoutes(),
		a.logs.logRoutes(),
		a.auditTrail.auditRoutes(),
		a.units.pluginRoutes(),
		a.files.fileRoutes(),
		a.cluster.clusterRoutes(),
		a.docs.docsRoutes(),
	)
}

// RepositoryURL is where the runtime is developed: the document's contact.
const RepositoryURL = "https://github.com/caddy-runtime/runtime"

// headerTooLarge names the answer of the HTTP server to a request whose header is over its
// limit, among the document's reusable responses.
const headerTooLarge = "HeaderFieldsTooLarge"

// servers returns the document's server for a runtime mounted at at ("" at the root): the
// paths of the document are absolute, so the server is the mount path alone.
func servers(at string) []openapi.Server {
	if at == "" {
		return []openapi.Server{{URL: "/", Description: "the host serving this document: the paths are absolute"}}
	}
	return []openapi.Server{{URL: at, Description: "the runtime's mount path; the paths are below it"}}
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}`)

// document generates the OpenAPI document of the route table.
func (a *API) document(table []route) openapi.Document {
	schemas := openapi.NewSchemas()
	doc := openapi.Document{
		OpenAPI:           openapi.Version,
		JSONSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
		Info: openapi.Info{
			Title:   "Runtime management API",
			Version: a.version,
			Description: "Manage the workers, plugins, API keys and sessions of a runtime. " +
				"Every error of the API answers with the envelope {\"error\":{\"code\",\"message\"}}; every answer of the API carries X-Request-Id.",
			Contact: &openapi.Contact{Name: "The runtime project", URL: RepositoryURL},
			License: &openapi.License{Name: "Apache License 2.0", Identifier: "Apache-2.0"},
		},
		Servers: servers(""),
		Tags: []openapi.Tag{
			{Name: "discovery", Description: "Finding the API"},
			{Name: "health", Description: "Health, readiness and liveness probes"},
			{Name: "session", Description: "Browser sessions: exchange a key for a session cookie, list and end sessions"},
			{Name: "keys", Description: "API keys, their roles, permissions and namespaces"},
			{Name: "workers", Description: "Workers (apps): upload, list, enable, disable, remove"},
			{Name: "plugins", Description: "Plugins: upload, list, enable, disable, remove"},
			{Name: "cluster", Description: "The instances sharing the desired state, and how far each has converged"},
			{Name: "documentation", Description: "This document and its interactive reference"},
		},
		Paths: map[string]*openapi.PathItem{},
		Components: openapi.Components{
			Responses: map[string]openapi.Response{
				headerTooLarge: {
					Description: "The request's header is over the HTTP server's limit (Caddy's max_header_size, 1 MB by default; " +
						"many large cookies for the host can reach it). The HTTP server answers in plain text before the API reads the request: " +
						"no envelope, no X-Request-Id.",
					Content: map[string]openapi.MediaType{"text/plain": {Schema: &openapi.Schema{Type: "string"}}},
				},
			},
			SecuritySchemes: map[string]openapi.SecurityScheme{
				"apiKey":  {Type: "apiKey", In: "header", Name: "X-API-Key", Description: "root key or generated API key"},
				"bearer":  {Type: "http", Scheme: "bearer", Description: "root key or generated API key"},
				"session": {Type: "apiKey", In: "cookie", Name: "runtime_api_key", Description: "cpanel session cookie"},
				"hostSession": {Type: "apiKey", In: "cookie", Name: HostSessionCookie,
					Description: "the same session over HTTPS, read first; only the API's own host can set it"},
			},
		},
	}
	requestID := openapi.Header{Description: "correlation id of the request", Schema: &openapi.Schema{Type: "string"}}
	for _, rt := range table {
		op := &openapi.Operation{
			OperationID: rt.id,
			Summary:     rt.summary,
			Description: rt.description,
			Tags:        []string{rt.tag},
			Parameters:  pathParameters(rt.path, rt.params),
			Responses:   map[string]openapi.Response{},
			Security:    []map[string][]string{},
			Permission:  rt.permission,
		}
		if !rt.public {
			op.Security = []map[string][]string{{"apiKey": {}}, {"bearer": {}}, {"hostSession": {}}, {"session": {}}}
		}
		if rt.request != nil {
			op.RequestBody = &openapi.RequestBody{Required: true, Content: map[string]openapi.MediaType{
				rt.request.contentType: {Schema: schemas.Of(rt.request.body)},
			}}
		}
		for _, resp := range withPipelineResponses(rt) {
			out := openapi.Response{
				Description: resp.description,
				Headers:     map[string]openapi.Header{trace.RequestIDHeader: requestID},
			}
			for name, h := range resp.headers {
				out.Headers[name] = h
			}
			if resp.body != nil {
				schema := schemas.Of(resp.body)
				if len(resp.alt) > 0 {
					schema = &openapi.Schema{AnyOf: []*openapi.Schema{schema}}
					for _, alt := range resp.alt {
						schema.AnyOf = append(schema.AnyOf, schemas.Of(alt))
					}
				}
				out.Content = map[string]openapi.MediaType{"application/json": {Schema: schema}}
			}
			for ct, schema := range resp.content {
				if out.Content == nil {
					out.Content = map[string]openapi.MediaType{}
				}
				out.Content[ct] = openapi.MediaType{Schema: schema}
			}
			op.Responses[strconv.Itoa(resp.status)] = out
		}
		op.Responses[strconv.Itoa(http.StatusRequestHeaderFieldsTooLarge)] = openapi.Response{Ref: "#/components/responses/" + headerTooLarge}
		p := wildcard.ReplaceAllString(a.fullPath(rt.path), "{$1}")
		item := doc.Paths[p]
		if item == nil {
			item = &openapi.PathItem{}
			doc.Paths[p] = item
		}
		(*item)[strings.ToLower(rt.method)] = op
	}
	doc.Components.Schemas = schemas.Components()
	return doc
}

// withPipelineResponses adds the answers the request pipeline can give in front of a route to
// the route's own, merging descriptions that share a status.
func withPipelineResponses(rt route) []response {
	all := slices.Clone(rt.responses)
	if rt.file {
		all = append(all,
			response{status: http.StatusPartialContent, description: "The part of the 200 answer's body a Range header asked for",
				content: partOf(rt.responses), headers: map[string]openapi.Header{"Content-Range": {
					Description: "which bytes of the body these are", Schema: &openapi.Schema{Type: "string"}}}},
			response{status: http.StatusNotModified, description: "Unchanged since the ETag sent in If-None-Match"},
			response{status: http.StatusPreconditionFailed, description: "If-Match names no ETag of the body; no body"},
			response{status: http.StatusRequestedRangeNotSatisfiable, description: "The Range header names no part of the body; the reason in plain text",
				content: map[string]*openapi.Schema{"text/plain": {Type: "string"}}})
	}
	if mutating(rt.method) {
		all = append(all, errorResponse(http.StatusForbidden, "Origin missing or foreign (CSRF_REJECTED)"))
	}
	if !rt.public {
		all = append(all,
			errorResponse(http.StatusForbidden, "Session cookie sent from a page of another origin: Sec-Fetch-Site is not same-origin (CSRF_REJECTED)"),
			errorResponse(http.StatusUnauthorized, "No credential, an unknown, revoked or expired key, or an ended or expired session (AUTH_REQUIRED); "+
				"more than one runtime_api_key cookie without a header credential or the __Host- cookie (DUPLICATE_SESSION_COOKIE)"),
			errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY), or the key store's primary is unreachable in sync mode (KEY_STORE_UNAVAILABLE)"))
	}
	if rt.permission != "" {
		all = append(all, errorResponse(http.StatusForbidden, "The key lacks permission "+rt.permission+" (PERMISSION_DENIED)"))
	}
	all = append(all, errorResponse(http.StatusInternalServerError, "Internal error; the message carries the request id"))
	merged := []response{}
	for _, resp := range all {
		i := slices.IndexFunc(merged, func(m response) bool { return m.status == resp.status })
		if i < 0 {
			merged = append(merged, resp)
			continue
		}
		merged[i].description += "; " + resp.description
	}
	return merged
}

// partOf returns the content of a 206 answer: a range of the bytes of the 200 answer, in its
// content types.
func partOf(responses []response) map[string]*openapi.Schema {
	part := map[string]*openapi.Schema{}
	for _, resp := range responses {
		if resp.status != http.StatusOK {
			continue
		}
		for ct := range resp.content {
			part[ct] = &openapi.Schema{Description: "a range of the bytes of the 200 answer's body"}
		}
	}
	return part
}

// pathParameters returns the declared parameters plus a string parameter for every path
// wildcard that was not declared.
func pathParameters(p string, declared []openapi.Parameter) []openapi.Parameter {
	out := slices.Clone(declared)
	for _, m := range wildcard.FindAllStringSubmatch(p, -1) {
		if !slices.ContainsFunc(out, func(q openapi.Parameter) bool { return q.In == "path" && q.Name == m[1] }) {
			out = append(out, openapi.Parameter{Name: m[1], In: "path", Required: true, Schema: &openapi.Schema{Type: "string"}})
		}
	}
	return out
}
