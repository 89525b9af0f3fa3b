package phases_test

import (
	"fmt"

	"github.com/hpcq/hpcq/pkg/phases"
)

func ExampleCheckPath() {
	for _, p := range []string{"src/main.c", "../../etc/passwd", "/etc/passwd", "a//b"} {
		fmt.Println(phases.CheckPath(p))
	}
	// Output:
	// <nil>
	// invalid workspace: path "../../etc/passwd": '..' escapes the workspace
	// invalid workspace: path "/etc/passwd": absolute paths are not allowed
	// invalid workspace: path "a//b": not a clean path (empty or '.' segment)
}

func ExampleCapture() {
	c := phases.NewCapture(16) // keeps 4 bytes of the head, 12 of the tail
	fmt.Fprint(c, "compiling... lots of output ... done: 42 MLUP/s")
	fmt.Println(c.String())
	// Output:
	// comp
	// [... 31 bytes dropped ...]
	// e: 42 MLUP/s
}
