#!/bin/sh
# The spmv-omp harness (docs/evaluation.md): builds the driver and runs it;
# the driver runs the node's program ($HPCQ_NODE/spmv) on the matrices it
# writes and checks what the program writes.
set -eu
gcc -O2 -Wall -o driver driver.c -lm
[ -x "$HPCQ_NODE/spmv" ] || {
	printf '%s\n' "$HPCQ_INPUTS" | while IFS= read -r in; do
		[ -n "$in" ] && printf '{"input": "%s", "repeat": 1, "correct": false, "note": "no executable spmv in the node'"'"'s workspace"}\n' "$in"
	done > "$HPCQ_EVAL_REPORT"
	exit 0
}
exec ./driver
