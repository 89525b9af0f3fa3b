package results_test

import (
	"os"
	"time"

	"github.com/hpcq/hpcq/pkg/results"
)

// A query's answer, printed as scheduler query prints it.
func ExampleTable_Write() {
	tab := &results.Table{
		Columns: []string{"compiler", "compiles", "failure_rate"},
		Rows:    [][]any{{"gcc", uint64(12), 0.25}, {"nvcc", uint64(3), 0.0}},
	}
	_ = tab.Write(os.Stdout, "table")
	_ = tab.Write(os.Stdout, "csv")
	_ = (&results.Table{Columns: []string{"run", "ts"}, Rows: [][]any{{"r1", time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)}}}).Write(os.Stdout, "json")
	// Output:
	// compiler  compiles  failure_rate
	// gcc       12        0.25
	// nvcc      3         0
	// compiler,compiles,failure_rate
	// gcc,12,0.25
	// nvcc,3,0
	// [
	//   {"run": "r1", "ts": "2026-11-22 09:30:00"}
	// ]
}
