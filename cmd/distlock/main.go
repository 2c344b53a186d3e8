package main

import (
	"context"
	"os"

	// Backends register their URL schemes when imported.
	_ "github.com/distlock-go/distlock/memlock"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
