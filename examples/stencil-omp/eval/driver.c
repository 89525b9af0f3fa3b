/* The stencil-omp harness's driver (docs/evaluation.md): it calls the
 * node's kernel, jacobi() of its jacobi.o, on grids it makes itself, times
 * each call with the monotonic clock, and checks every result against the
 * reference Jacobi (reference.c) on the same start grid. Each repeat starts
 * from a new random grid, so that a kernel cannot answer from a result it
 * kept. It writes one JSON line per input and repeat to HPCQ_EVAL_REPORT.
 *
 * Inputs (HPCQ_INPUTS, one per line): N=<grid side>,ITERS=<sweeps>.
 * Metric: GFLOP/s, 4 floating-point operations per updated point.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double *jacobi(int n, int iters, double *a, double *b);            /* the node's */
double *reference_jacobi(int n, int iters, double *a, double *b);  /* reference.c */

static const double tolerance = 1e-9;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* start fills g with a random interior in [0, 1) (seeded) and fixed edges:
 * the top row 1.0, the others 0. */
static void start(double *g, int n, unsigned seed) {
    srand(seed);
    for (long i = 0; i < (long)n * n; i++)
        g[i] = (double)rand() / ((double)RAND_MAX + 1.0);
    for (int k = 0; k < n; k++) {
        g[k] = 1.0;
        g[(long)(n - 1) * n + k] = 0.0;
        g[(long)k * n] = 0.0;
        g[(long)k * n + n - 1] = 0.0;
    }
}

static double *grid(int n) {
    double *g = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!g) {
        fprintf(stderr, "driver: out of memory for N=%d\n", n);
        exit(3);
    }
    return g;
}

/* measure runs the repeats of one input and writes their lines. */
static void measure(FILE *out, const char *input, int n, int iters, int repeats, int quick) {
    double *init = grid(n), *a = grid(n), *b = grid(n), *ra = grid(n), *rb = grid(n);
    size_t bytes = sizeof(double) * (size_t)n * (size_t)n;
    for (int r = 0; r <= repeats; r++) { /* repeat 0: a warm-up, checked too */
        start(init, n, 1000u * (unsigned)n + (unsigned)r);
        memcpy(a, init, bytes);
        memcpy(b, init, bytes);
        double t0 = now();
        double *got = jacobi(n, iters, a, b);
        double secs = now() - t0;
        memcpy(ra, init, bytes);
        memcpy(rb, init, bytes);
        double *want = reference_jacobi(n, iters, ra, rb);
        fprintf(out, "{\"input\": \"%s\", \"repeat\": %d, ", input, r);
        if (got != a && got != b) {
            fprintf(out, "\"correct\": false, \"note\": \"jacobi returned a grid that is neither of the two it was given\"}\n");
            continue;
        }
        double err = 0;
        long worst = 0;
        for (long i = 0; i < (long)n * n; i++) {
            double d = fabs(got[i] - want[i]);
            if (!(d <= err)) { /* NaN counts as the worst */
                err = isnan(d) ? INFINITY : d;
                worst = i;
                if (isnan(d)) break;
            }
        }
        if (!(err <= tolerance)) {
            fprintf(out, "\"correct\": false, \"error\": %.3g, \"tolerance\": %g, \"note\": \"largest error at row %ld, column %ld\"}\n",
                    isinf(err) ? 1e308 : err, tolerance, worst / n, worst % n);
            continue;
        }
        fprintf(out, "\"correct\": true, \"error\": %.3g, \"tolerance\": %g", err, tolerance);
        if (!quick && secs > 0)
            fprintf(out, ", \"metric\": %.6g, \"unit\": \"GFLOP/s\"", 4.0 * (n - 2) * (double)(n - 2) * iters / secs / 1e9);
        fprintf(out, "}\n");
    }
    free(init); free(a); free(b); free(ra); free(rb);
}

int main(void) {
    const char *inputs = getenv("HPCQ_INPUTS"), *report = getenv("HPCQ_EVAL_REPORT"), *stage = getenv("HPCQ_STAGE");
    const char *rep = getenv("HPCQ_REPEATS");
    if (!inputs || !report) {
        fprintf(stderr, "driver: HPCQ_INPUTS and HPCQ_EVAL_REPORT must be set (it runs as hpcq's evaluate phase)\n");
        return 2;
    }
    int quick = stage && strcmp(stage, "quick") == 0;
    int repeats = rep ? atoi(rep) : 0;
    if (repeats <= 0)
        repeats = 5;
    FILE *out = fopen(report, "w"); /* truncated: only the driver's lines count */
    if (!out) {
        perror(report);
        return 2;
    }
    char *list = strdup(inputs);
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        int n, iters;
        if (sscanf(line, "N=%d,ITERS=%d", &n, &iters) != 2 || n < 3 || n > 20000 || iters < 1) {
            fprintf(stderr, "driver: input %s: want N=<3..20000>,ITERS=<1 or more>\n", line);
            return 2;
        }
        measure(out, line, n, iters, repeats, quick);
        fflush(out);
    }
    free(list);
    return fclose(out) == 0 ? 0 : 2;
}
