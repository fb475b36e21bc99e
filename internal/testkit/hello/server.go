//go:build !wasip1

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	addr := net.JoinHostPort(os.Getenv("HOST"), os.Getenv("PORT"))
	err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, greeting())
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
