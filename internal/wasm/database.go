package wasm

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// DatabaseModule is the host module that gives an instance its worker's database (manifest
// database: true), the only one it can name. Its functions:
//
//	execute(ptr, len i32) i32  runs the Hrana-over-HTTP v2 pipeline (JSON) of len bytes at ptr
//	                           and returns the length of its JSON answer, held for answer;
//	                           -1 when ptr and len are outside the instance's memory
//	answer(ptr, len i32) i32   copies the answer held to ptr and returns its length; -1 when
//	                           len is too short for it, or outside the memory, or none is held
const DatabaseModule = "runtime_database"

// databaseFunctions are the functions of DatabaseModule.
var databaseFunctions = []string{"execute", "answer"}

// MaxPipeline bounds the pipeline of one execute call.
const MaxPipeline = 16 << 20

// Database is a worker's database as one instance reaches it (Request.Database).
type Database interface {
	// Execute runs a Hrana-over-HTTP v2 pipeline and returns its JSON answer; it ends when
	// ctx does.
	Execute(ctx context.Context, pipeline []byte) []byte
}

// databaseCall is what the functions of DatabaseModule hold for one instance.
type databaseCall struct {
	db     Database
	answer []byte
}

type databaseKey struct{}

// instantiateDatabase adds DatabaseModule to r; each call finds its instance's database in
// its context.
func instantiateDatabase(ctx context.Context, r wazero.Runtime) error {
	i32 := []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}
	_, err := r.NewHostModuleBuilder(DatabaseModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(execute), i32, []api.ValueType{api.ValueTypeI32}).Export("execute").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(answer), i32, []api.ValueType{api.ValueTypeI32}).Export("answer").
		Instantiate(ctx)
	return err
}

func execute(ctx context.Context, mod api.Module, stack []uint64) {
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	call, _ := ctx.Value(databaseKey{}).(*databaseCall)
	mem := mod.Memory()
	if mem == nil {
		stack[0] = api.EncodeI32(-1)
		return
	}
	body, ok := mem.Read(ptr, n)
	switch {
	case !ok:
		stack[0] = api.EncodeI32(-1)
		return
	case call == nil || call.db == nil:
		stack[0] = api.EncodeI32(int32(len(noDatabase)))
		return
	case n > MaxPipeline:
		call.answer = jsonError(fmt.Sprintf("the pipeline holds %d bytes, more than the %d a call may send", n, MaxPipeline))
	default:
		// The bytes are the instance's memory: copied, they stay what the guest sent.
		call.answer = call.db.Execute(ctx, append([]byte(nil), body...))
	}
	stack[0] = api.EncodeI32(int32(len(call.answer)))
}

// noDatabase answers a call of an instance that has no database.
var noDatabase = jsonError("this worker has no database: set database: true in its manifest")

func answer(ctx context.Context, mod api.Module, stack []uint64) {
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	call, _ := ctx.Value(databaseKey{}).(*databaseCall)
	held := noDatabase
	if call != nil && call.db != nil {
		held = call.answer
	}
	if held == nil || int(n) < len(held) || mod.Memory() == nil || !mod.Memory().Write(ptr, held) {
		stack[0] = api.EncodeI32(-1)
		return
	}
	if call != nil {
		call.answer = nil
	}
	stack[0] = api.EncodeI32(int32(len(held)))
}

func jsonError(message string) []byte {
	b, _ := json.Marshal(map[string]string{"error": message})
	return b
}
