package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintf(os.Stdout, "Content-Type: text/plain; charset=utf-8\r\n\r\n%s", greeting())
}
