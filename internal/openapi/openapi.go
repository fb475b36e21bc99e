// Package openapi models the parts of an OpenAPI 3.1 document the runtime publishes and derives
// JSON Schemas from Go types, so a response schema cannot drift from the struct that is encoded.
package openapi

// Version is the OpenAPI version of the documents built here.
const Version = "3.1.0"

// Document is an OpenAPI 3.1 document.
type Document struct {
	OpenAPI           string               `json:"openapi"`
	Info              Info                 `json:"info"`
	JSONSchemaDialect string               `json:"jsonSchemaDialect,omitempty"`
	Servers           []Server             `json:"servers,omitempty"`
	Tags              []Tag                `json:"tags,omitempty"`
	Paths             map[string]*PathItem `json:"paths"`
	Components        Components           `json:"components"`
}

// Info is the document's metadata.
type Info struct {
	Title       string   `json:"title"`
	Version     string   `json:"version"`
	Description string   `json:"description,omitempty"`
	Contact     *Contact `json:"contact,omitempty"`
	License     *License `json:"license,omitempty"`
}

// Contact says where to ask about the API.
type Contact struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
}

// License is the API's license; Identifier is its SPDX expression.
type License struct {
	Name       string `json:"name"`
	Identifier string `json:"identifier,omitempty"`
}

// Server is a base URL of the API.
type Server struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
}

// Tag groups operations.
type Tag struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PathItem holds the operations of one path, keyed by lower-case method.
type PathItem map[string]*Operation

// Operation is one method on one path.
type Operation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary,omitempty"`
	Description string                `json:"description,omitempty"`
	Tags        []string              `json:"tags,omitempty"`
	Parameters  []Parameter           `json:"parameters,omitempty"`
	RequestBody *RequestBody          `json:"requestBody,omitempty"`
	Responses   map[string]Response   `json:"responses"`
	Security    []map[string][]string `json:"security"`
	// Permission is the key permission the operation needs; empty for any credential.
	Permission string `json:"x-permission,omitempty"`
}

// Parameter is a path, query or header parameter.
type Parameter struct {
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Required    bool    `json:"required,omitempty"`
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// RequestBody describes an operation's body.
type RequestBody struct {
	Required bool                 `json:"required,omitempty"`
	Content  map[string]MediaType `json:"content"`
}

// Response describes one response status, or refers to one of Components.Responses by Ref
// (then nothing else is set).
type Response struct {
	Ref         string               `json:"$ref,omitempty"`
	Description string               `json:"description,omitempty"`
	Headers     map[string]Header    `json:"headers,omitempty"`
	Content     map[string]MediaType `json:"content,omitempty"`
}

// Header describes a response header.
type Header struct {
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// MediaType holds the schema of one content type.
type MediaType struct {
	Schema *Schema `json:"schema,omitempty"`
}

// Components holds the reusable parts of the document.
type Components struct {
	Schemas         map[string]*Schema        `json:"schemas,omitempty"`
	Responses       map[string]Response       `json:"responses,omitempty"`
	SecuritySchemes map[string]SecurityScheme `json:"securitySchemes,omitempty"`
}

// SecurityScheme describes one way to send a credential.
type SecurityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme,omitempty"`
	Name        string `json:"name,omitempty"`
	In          string `json:"in,omitempty"`
	Description string `json:"description,omitempty"`
}

// Schema is a JSON Schema (2020-12) as OpenAPI 3.1 uses it.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a string, or a list for unions such as ["string","null"]
	Format               string             `json:"format,omitempty"`
	ContentMediaType     string             `json:"contentMediaType,omitempty"`
	Description          string             `json:"description,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	Examples             []any              `json:"examples,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
}
