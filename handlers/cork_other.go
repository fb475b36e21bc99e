//go:build !linux

package handlers

import "net/http"

// corked runs write: corking a connection (TCP_CORK) is Linux's.
func corked(_ http.ResponseWriter, _ *http.Request, _ int, write func()) { write() }
