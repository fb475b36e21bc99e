package testkit

import "encoding/binary"

// TinyWasm returns a WebAssembly module of a few hundred bytes, emitted byte by byte: a WASI
// command whose _start writes out, as it is, to standard output with one fd_write. It
// imports that function from importModule.importName, which is wasi_snapshot_preview1.fd_write
// for a valid worker; another name makes a module the runtime refuses.
func TinyWasm(out, importModule, importName string) []byte {
	i32 := byte(0x7f)
	types := vec(
		append([]byte{0x60}, append(vec([]byte{i32}, []byte{i32}, []byte{i32}, []byte{i32}), vec([]byte{i32})...)...),
		[]byte{0x60, 0x00, 0x00},
	)
	imports := vec(append(append(name(importModule), name(importName)...), 0x00, 0x00))
	funcs := vec([]byte{0x01})
	memory := vec([]byte{0x00, 0x01}) // one page, no maximum
	exports := vec(append(name("memory"), 0x02, 0x00), append(name("_start"), 0x00, 0x01))
	// fd_write(1, iovs=0, 1, nwritten=8), result dropped.
	body := []byte{0x00, 0x41, 0x01, 0x41, 0x00, 0x41, 0x01, 0x41, 0x08, 0x10, 0x00, 0x1a, 0x0b}
	code := vec(append(uleb(uint32(len(body))), body...))
	// The iovec at 0 points at the text at 16; nwritten lands at 8.
	data := binary.LittleEndian.AppendUint32(nil, 16)
	data = binary.LittleEndian.AppendUint32(data, uint32(len(out)))
	data = append(data, make([]byte, 8)...)
	data = append(data, out...)
	segment := append([]byte{0x00, 0x41, 0x00, 0x0b}, append(uleb(uint32(len(data))), data...)...)
	mod := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	for _, s := range []struct {
		id   byte
		body []byte
	}{{1, types}, {2, imports}, {3, funcs}, {5, memory}, {7, exports}, {10, code}, {11, vec(segment)}} {
		mod = append(mod, s.id)
		mod = append(mod, uleb(uint32(len(s.body)))...)
		mod = append(mod, s.body...)
	}
	return mod
}

func uleb(v uint32) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, c|0x80)
			continue
		}
		return append(out, c)
	}
}

func name(s string) []byte { return append(uleb(uint32(len(s))), s...) }

func vec(items ...[]byte) []byte {
	out := uleb(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

// ManyFunctionsWasm returns a WebAssembly module of n tiny functions (four bytes each: a type
// index and an empty body), the first exported as _start: a small archive holding a large
// module, whose compilation takes memory and time per function.
func ManyFunctionsWasm(n int) []byte {
	types := vec([]byte{0x60, 0x00, 0x00})
	funcs := append(uleb(uint32(n)), make([]byte, n)...) // every function of type 0
	memory := vec([]byte{0x00, 0x01})
	exports := vec(append(name("_start"), 0x00, 0x00))
	code := uleb(uint32(n))
	for range n {
		code = append(code, 0x02, 0x00, 0x0b) // two bytes: no locals, end
	}
	mod := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	for _, s := range []struct {
		id   byte
		body []byte
	}{{1, types}, {3, funcs}, {5, memory}, {7, exports}, {10, code}} {
		mod = append(mod, s.id)
		mod = append(mod, uleb(uint32(len(s.body)))...)
		mod = append(mod, s.body...)
	}
	return mod
}
