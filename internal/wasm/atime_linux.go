package wasm

import "syscall"

// atim is the access time in st, under Linux's name for it.
func atim(st *syscall.Stat_t) syscall.Timespec { return st.Atim }
