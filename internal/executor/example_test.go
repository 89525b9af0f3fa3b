package executor_test

import (
	"fmt"

	"github.com/hpcq/hpcq/internal/executor"
)

func ExampleCapture() {
	c := executor.NewCapture(16) // keeps 4 bytes of the head, 12 of the tail
	fmt.Fprint(c, "compiling... lots of output ... done: 42 MLUP/s")
	fmt.Println(c.String())
	// Output:
	// comp
	// [... 31 bytes dropped ...]
	// e: 42 MLUP/s
}
