// Package ui holds the runtime's web pages, the control panel and the API reference: this
// folder's Vite project (Svelte and TypeScript sources, Swagger UI, at the versions its
// lockfile pins), which make ui builds into dist/, embedded here so that go build and xcaddy
// builds need no Node. The names of the pages' assets carry a hash of their content, and
// Assets serves them to be kept for a year; File serves the answers that change with the
// server (a page rendered for its path, the OpenAPI document), to be revalidated.
package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"path"
	"slices"
)

//go:embed all:dist docs/page.html
var files embed.FS

// CPanel returns the control panel's built index.html and its assets (dist/cpanel).
func CPanel() ([]byte, *Assets, error) {
	index, err := files.ReadFile("dist/cpanel/index.html")
	if err != nil {
		return nil, nil, fmt.Errorf("the cpanel's bundle: %w; rebuild it with make ui", err)
	}
	assets, err := newAssets("dist/cpanel/assets")
	return index, assets, err
}

// DocsAssets returns the API reference's assets (dist/docs): Swagger UI's script and
// stylesheet.
func DocsAssets() (*Assets, error) { return newAssets("dist/docs/assets") }

var docsPage = template.Must(template.ParseFS(files, "docs/page.html"))

// DocsPage renders the API reference's page for the API at apiPath, which serves assets, the
// reference's, under apiPath/docs/ and its OpenAPI document at apiPath/openapi.json.
func DocsPage(apiPath string, assets *Assets) (*File, error) {
	script := slices.IndexFunc(assets.names, func(n string) bool { return path.Ext(n) == ".js" })
	style := slices.IndexFunc(assets.names, func(n string) bool { return path.Ext(n) == ".css" })
	if script < 0 || style < 0 {
		return nil, fmt.Errorf("the API reference's bundle has no script or no stylesheet (%v); rebuild it with make ui", assets.names)
	}
	var page bytes.Buffer
	err := docsPage.Execute(&page, struct{ Assets, Script, Style, Spec string }{
		apiPath + "/docs", assets.names[script], assets.names[style], apiPath + "/openapi.json"})
	if err != nil {
		return nil, fmt.Errorf("the docs page: %w", err)
	}
	return NewFile(page.Bytes(), "text/html; charset=utf-8"), nil
}
