// Command slurm-bridge will start hpcq workers as Slurm jobs when the queue
// backs up. It is not built yet: it says so and exits with status 2.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "slurm-bridge: not built yet in this version of hpcq; start workers with `worker` (for example from an sbatch script)")
	os.Exit(2)
}
