package wasm

import "syscall"

// atim is the access time in st, under Darwin's name for it.
func atim(st *syscall.Stat_t) syscall.Timespec { return st.Atimespec }
