package schema_test

import (
	"fmt"

	"github.com/hpcq/hpcq/pkg/schema"
)

func ExampleCheckPath() {
	for _, p := range []string{"src/main.c", "../../etc/passwd", "/etc/passwd", "a//b"} {
		fmt.Println(schema.CheckPath(p))
	}
	// Output:
	// <nil>
	// invalid workspace: path "../../etc/passwd": '..' escapes the workspace
	// invalid workspace: path "/etc/passwd": absolute paths are not allowed
	// invalid workspace: path "a//b": not a clean path (empty or '.' segment)
}
