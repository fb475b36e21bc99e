package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// WASI is the only module a worker may import from: WASI preview 1.
const WASI = wasi_snapshot_preview1.ModuleName

// magic and version open every WebAssembly binary module.
var (
	magic   = []byte{0x00, 'a', 's', 'm'}
	version = []byte{0x01, 0x00, 0x00, 0x00}
)

// Import is one import of a module.
type Import struct {
	Module, Name string
	Kind         string // func, table, memory, global or tag
}

func (i Import) String() string { return i.Module + "." + i.Name }

// Check tells whether binary is a WebAssembly module a worker may run: a binary module
// (not the text format), a command (it exports _start), whose imports are all functions of
// WASI preview 1 that the runtime provides, or, when database is true (the manifest's
// database: true), of DatabaseModule. It reads the module's sections only; compiling waits
// for the first request. The error says what is wrong and names the first import refused.
func Check(binary []byte, database bool) error {
	m, err := inspect(binary)
	if err != nil {
		return err
	}
	return m.check(database)
}

// MaxFunctions is the most functions a module may define, as V8 allows: compiling takes
// memory and time per function, so a small module of many tiny ones could take gigabytes.
const MaxFunctions = 1_000_000

// info is what Check reads of a module.
type info struct {
	imports  []Import
	exports  []string // names of exported functions
	minPages uint32   // the largest initial size of its memories, in 64 KiB pages
	// functions counts the functions it defines.
	functions uint32
	// maxPages is the largest declared maximum of its memories, in pages; unbounded when one
	// declares none.
	maxPages  uint32
	unbounded bool
}

// reserve is the most linear memory an instance of the module may take under limit bytes:
// the limit, or the module's declared maximum when smaller (at least a page).
func (m info) reserve(limit int64) int64 {
	if m.unbounded {
		return limit
	}
	return max(min(limit, int64(m.maxPages)<<16), 1<<16)
}

// inspect reads a binary module's header and sections.
func inspect(binary []byte) (info, error) {
	if !bytes.HasPrefix(binary, magic) {
		if bytes.HasPrefix(bytes.TrimSpace(binary), []byte("(module")) {
			return info{}, errors.New("is WebAssembly text, not a binary module: assemble it first (wat2wasm app.wat -o app.wasm)")
		}
		return info{}, errors.New("is not a WebAssembly module (it does not start with \\0asm): build it for WASI preview 1, e.g. GOOS=wasip1 GOARCH=wasm go build -o app.wasm")
	}
	if len(binary) < 8 || !bytes.Equal(binary[4:8], version) {
		return info{}, errors.New("is not a WebAssembly module of version 1")
	}
	m, err := sections(binary[8:])
	if err != nil {
		return info{}, fmt.Errorf("is not a valid WebAssembly module: %w", err)
	}
	return m, nil
}

// check refuses what a worker may not import or lacks; database allows DatabaseModule.
func (m info) check(database bool) error {
	imports, exports := m.imports, m.exports
	provided := wasiFunctions()
	for _, imp := range imports {
		switch {
		case imp.Module == DatabaseModule && !database:
			return fmt.Errorf("imports %s, the worker's database: set database: true in its manifest", imp)
		case imp.Module == DatabaseModule && (imp.Kind != "func" || !slices.Contains(databaseFunctions, imp.Name)):
			return fmt.Errorf("imports %s, which is not a function of %s (%s)", imp, DatabaseModule, strings.Join(databaseFunctions, ", "))
		case imp.Module == DatabaseModule:
		case imp.Module != WASI:
			return fmt.Errorf("imports %s (a %s), but workers may import only functions of %s (WASI preview 1) and %s: build it for wasip1, without other host modules", imp, imp.Kind, WASI, DatabaseModule)
		case imp.Kind != "func":
			return fmt.Errorf("imports %s, a %s, but %s provides only functions", imp, imp.Kind, WASI)
		case !slices.Contains(provided, imp.Name):
			return fmt.Errorf("imports %s, which is not a function of WASI preview 1", imp)
		}
	}
	if !slices.Contains(exports, "_start") {
		return errors.New("exports no _start function: a worker is a WASI command (a program with a main), not a library")
	}
	return nil
}

// wasiFunctions lists the functions the runtime's WASI preview 1 provides.
var wasiFunctions = sync.OnceValue(func() []string {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	host, err := wasi_snapshot_preview1.NewBuilder(r).Compile(ctx)
	if err != nil {
		panic("wasm: compiling WASI: " + err.Error())
	}
	var names []string
	for name := range host.ExportedFunctions() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
})

// Section ids of a module that Check reads.
const (
	sectionImport   = 2
	sectionFunction = 3
	sectionMemory   = 5
	sectionExport   = 7
)

// sections reads the imports, the names of the exported functions and the initial size of
// the memories of a module's sections (the bytes after the header).
func sections(b []byte) (m info, err error) {
	r := &reader{b: b}
	for r.more() {
		id := r.byte()
		size := r.u32()
		body := r.bytes(size)
		if r.err != nil {
			return m, r.err
		}
		s := &reader{b: body}
		switch id {
		case sectionImport:
			for n := s.u32(); n > 0 && s.err == nil; n-- {
				imp := Import{Module: s.name(), Name: s.name()}
				switch kind := s.byte(); kind {
				case 0:
					imp.Kind = "func"
					s.u32()
				case 1:
					imp.Kind = "table"
					s.byte()
					s.limits()
				case 2:
					imp.Kind = "memory"
					s.limits()
					m.unbounded = true // refused by check anyway
				case 3:
					imp.Kind = "global"
					s.byte()
					s.byte()
				case 4:
					imp.Kind = "tag"
					s.byte()
					s.u32()
				default:
					return m, fmt.Errorf("import %s has unknown kind %#x", imp, kind)
				}
				m.imports = append(m.imports, imp)
			}
		case sectionFunction:
			if m.functions = s.u32(); m.functions > MaxFunctions {
				return m, fmt.Errorf("it defines %d functions, more than the %d a worker's module may have", m.functions, MaxFunctions)
			}
			s.b = nil // the functions' types are not needed
		case sectionMemory:
			for n := s.u32(); n > 0 && s.err == nil; n-- {
				low, high, bounded := s.limits()
				m.minPages = max(m.minPages, low)
				m.maxPages = max(m.maxPages, high)
				m.unbounded = m.unbounded || !bounded
			}
		case sectionExport:
			for n := s.u32(); n > 0 && s.err == nil; n-- {
				name := s.name()
				if kind := s.byte(); kind == 0 {
					m.exports = append(m.exports, name)
				}
				s.u32()
			}
		}
		if s.err != nil {
			return m, fmt.Errorf("section %d: %w", id, s.err)
		}
	}
	return m, r.err
}

// reader reads the binary format; the first error sticks and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("unexpected end")

func (r *reader) more() bool { return r.err == nil && len(r.b) > 0 }

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("number too long"))
	return 0
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.fail(errShort)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// limits reads the limits of a table or memory (flags, min and, when flagged, max) and
// returns them; bounded tells whether a max is declared.
func (r *reader) limits() (low, high uint32, bounded bool) {
	flags := r.byte()
	low = r.u32()
	if flags&1 != 0 {
		return low, r.u32(), true
	}
	return low, 0, false
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
