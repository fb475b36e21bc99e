//go:build wasip1

package wasmdb

import (
	"errors"
	"unsafe"
)

//go:wasmimport runtime_database execute
func execute(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport runtime_database answer
func answer(ptr unsafe.Pointer, n uint32) int32

// call sends one pipeline to the runtime and returns its answer.
func call(pipeline []byte) ([]byte, error) {
	if len(pipeline) == 0 {
		return nil, errors.New("wasmdb: empty pipeline")
	}
	n := execute(unsafe.Pointer(&pipeline[0]), uint32(len(pipeline)))
	if n < 0 {
		return nil, errors.New("wasmdb: the runtime refused the call")
	}
	out := make([]byte, max(n, 1))
	if answer(unsafe.Pointer(&out[0]), uint32(n)) != n {
		return nil, errors.New("wasmdb: the runtime held no answer")
	}
	return out[:n], nil
}
