//go:build !wasip1

package wasmdb

import "errors"

// call has no runtime to call outside a WebAssembly worker.
func call([]byte) ([]byte, error) {
	return nil, errors.New("wasmdb: the database is reached from a WebAssembly worker (GOOS=wasip1) with database: true alone")
}
