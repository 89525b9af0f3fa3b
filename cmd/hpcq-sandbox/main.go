// Command hpcq-sandbox is the sandbox helper hpcq workers start as the first
// process of each task command's namespaces (internal/nsinit). Install it
// beside the worker (and scheduler) binaries: a worker that finds it there
// starts it instead of itself, which saves about 25 ms per command. It is
// not a command to run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/hpcq/hpcq/internal/nsinit"
)

func main() {
	if !nsinit.IsHelper() {
		fmt.Fprintln(os.Stderr, "hpcq-sandbox: the sandbox helper of hpcq workers, started by them; not a command to run")
		os.Exit(2)
	}
	nsinit.Exit(nsinit.Main(os.Args[1], os.Args[2:]))
}
