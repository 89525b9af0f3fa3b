#!/bin/sh
# The stencil-omp harness (docs/evaluation.md): it links the node's kernel
# object, $HPCQ_NODE/jacobi.o, into driver.c and runs it. The object may
# define jacobi and nothing else global (no main, no clock or OpenMP
# function of its own that the driver would call instead of the real one)
# and may run no code at load (a constructor): otherwise, and when it does
# not link, every input is incorrect, in these words.
set -u
: > "$HPCQ_EVAL_REPORT"
obj="$HPCQ_NODE/jacobi.o"
wrong() {
	note=$(printf '%s' "$1" | tr '\n\t"\\' '    ' | cut -c1-400)
	printf '%s\n' "$HPCQ_INPUTS" | while IFS= read -r in; do
		[ -n "$in" ] && printf '{"input": "%s", "repeat": 1, "correct": false, "note": "%s"}\n' "$in" "$note" >> "$HPCQ_EVAL_REPORT"
	done
	exit 0
}
[ -f "$obj" ] || wrong "no jacobi.o in the node's workspace: its build must compile jacobi.c with -c into jacobi.o"
extra=$(nm -g --defined-only "$obj" 2>&1 | awk '$3 != "jacobi" { print $3 }' | tr '\n' ' ')
[ -z "$extra" ] || wrong "jacobi.o defines more than jacobi: $extra"
if objdump -h "$obj" | grep -Eq '\.(init_array|ctors|fini_array|dtors|preinit_array)'; then
	wrong "jacobi.o runs code of its own when it is loaded (a constructor or destructor)"
fi
gcc -O3 -march=native -fopenmp -o driver driver.c reference.c "$obj" -lm 2> link.log || wrong "jacobi.o does not link with the driver: $(cat link.log)"
exec ./driver
