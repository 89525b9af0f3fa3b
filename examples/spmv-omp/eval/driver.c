/* The spmv-omp harness's driver (docs/evaluation.md): for each input it
 * writes a random sparse matrix and a vector, runs the node's program on
 * them as a child (its own process group, a bare environment), checks the
 * vector it writes against its own power iteration, and times it: the
 * program's wall time at ITERS iterations less its time at 1, over ITERS-1
 * products, so that reading the files is not counted. Every repeat is a new
 * matrix (a program cannot answer from a result it kept). The report is
 * written once every child has ended.
 *
 * Inputs (HPCQ_INPUTS, one per line): N=<rows>,NNZ=<nonzeros per row>,ITERS=<products>.
 * The program: $HPCQ_NODE/spmv MATRIX X ITERS OUT (file formats: the idea's README).
 * Metric: GFLOP/s, 2 floating-point operations per nonzero and product.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const double tolerance = 1e-9; /* relative to the vector's largest entry */

typedef struct { int32_t n; int64_t nnz; int64_t *row; int32_t *col; double *val; } csr;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* generate: n rows of k nonzeros at random columns (the diagonal among
 * them), positive values that sum to 1 in each row, so that the iterates
 * stay bounded and every product changes them. */
static csr generate(int n, int k, uint64_t seed) {
    csr a = {n, (int64_t)n * k, malloc(sizeof(int64_t) * (n + 1)), malloc(sizeof(int32_t) * (size_t)n * k), malloc(sizeof(double) * (size_t)n * k)};
    rng = seed * 2654435761u + 1;
    a.row[0] = 0;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int j = 0; j < k; j++) {
            int64_t p = (int64_t)i * k + j;
            a.col[p] = j == 0 ? i : (int32_t)(next() % (uint64_t)n);
            a.val[p] = 0.1 + (double)(next() % 1000000) / 1e6;
            sum += a.val[p];
        }
        for (int j = 0; j < k; j++) a.val[(int64_t)i * k + j] /= sum;
        a.row[i + 1] = (int64_t)(i + 1) * k;
    }
    return a;
}

static int save(const char *path, const void *parts[], const size_t sizes[], int count) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (int i = 0; i < count; i++)
        if (fwrite(parts[i], 1, sizes[i], f) != sizes[i]) { fclose(f); return -1; }
    return fclose(f);
}

/* run starts the program as a child and waits for it: its wall time, or
 * a negative number when it did not exit 0 (*why says how). */
static double run(const char *prog, int iters, char *why, size_t whylen) {
    char it[32];
    snprintf(it, sizeof it, "%d", iters);
    unlink("y.bin");
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        char *argv[] = {(char *)prog, "A.csr", "x.bin", it, "y.bin", NULL};
        char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL, NULL};
        char omp[64];
        if (getenv("OMP_NUM_THREADS")) { snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%s", getenv("OMP_NUM_THREADS")); envp[1] = omp; }
        freopen("/dev/null", "w", stdout);
        execve(prog, argv, envp);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) { snprintf(why, whylen, "could not run the program: %s", strerror(errno)); return -1; }
    double t = now() - t0;
    kill(-pid, SIGKILL); /* whatever it left behind */
    if (WIFSIGNALED(status)) { snprintf(why, whylen, "the program was killed by signal %d", WTERMSIG(status)); return -1; }
    if (WEXITSTATUS(status) != 0) { snprintf(why, whylen, "the program exited with status %d", WEXITSTATUS(status)); return -1; }
    return t;
}

/* check compares y.bin with want: the largest error relative to want's
 * largest entry, or a negative number when the file is not n doubles. */
static double check(const double *want, int n, char *why, size_t whylen) {
    double *got = malloc(sizeof(double) * (size_t)n + 1);
    FILE *f = fopen("y.bin", "rb");
    size_t read = f ? fread(got, 1, sizeof(double) * (size_t)n + 1, f) : 0;
    if (f) fclose(f);
    if (read != sizeof(double) * (size_t)n) {
        snprintf(why, whylen, "y.bin holds %zu bytes, not %d doubles", read, n);
        free(got);
        return -1;
    }
    double scale = 0, err = 0;
    for (int i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (scale > 0 ? scale : 1);
        if (!(d <= err)) { err = isnan(d) ? INFINITY : d; snprintf(why, whylen, "largest error at entry %d", i); }
    }
    free(got);
    return err;
}

static char *report;
static size_t reportLen, reportCap;
static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...) {
    va_list ap;
    char buf[1024];
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (reportLen + k + 1 > reportCap) { reportCap = 2 * (reportCap + k + 1); report = realloc(report, reportCap); }
    memcpy(report + reportLen, buf, k);
    reportLen += k;
}

static void measure(const char *prog, const char *input, int n, int k, int iters, int repeats, int quick) {
    for (int r = 0; r <= repeats; r++) {
        csr a = generate(n, k, (uint64_t)n * 1000 + (uint64_t)k * 10 + r);
        double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n);
        rng ^= 0x9e3779b97f4a7c15u;
        for (int i = 0; i < n; i++) x[i] = (double)(next() % 1000000) / 1e6;
        int64_t n64 = n;
        const void *mp[] = {"CSR1", &a.n, &a.nnz, a.row, a.col, a.val};
        const size_t ms[] = {4, 4, 8, sizeof(int64_t) * (n64 + 1), sizeof(int32_t) * a.nnz, sizeof(double) * a.nnz};
        const void *xp[] = {x};
        const size_t xs[] = {sizeof(double) * n64};
        if (save("A.csr", mp, ms, 6) || save("x.bin", xp, xs, 1)) { fprintf(stderr, "driver: cannot write the inputs\n"); exit(2); }
        for (int it = 0; it < iters; it++) { /* the reference: y = A x, then x = y */
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int64_t p = a.row[i]; p < a.row[i + 1]; p++) s += a.val[p] * x[a.col[p]];
                y[i] = s;
            }
            double *t = x; x = y; y = t;
        }
        char why[256] = "";
        double t1 = quick ? 0 : run(prog, 1, why, sizeof why);
        double tk = t1 < 0 ? -1 : run(prog, iters, why, sizeof why);
        double err = tk < 0 ? -1 : check(x, n, why, sizeof why);
        line("{\"input\": \"%s\", \"repeat\": %d, ", input, r);
        if (err < 0)
            line("\"correct\": false, \"note\": \"%s\"}\n", why);
        else if (!(err <= tolerance))
            line("\"correct\": false, \"error\": %.3g, \"tolerance\": %g, \"note\": \"%s\"}\n", isinf(err) ? 1e308 : err, tolerance, why);
        else if (quick)
            line("\"correct\": true, \"error\": %.3g, \"tolerance\": %g}\n", err, tolerance);
        else /* below the clock's reach (tk <= t1): the whole run's rate, a bound from below */
            line("\"correct\": true, \"error\": %.3g, \"tolerance\": %g, \"metric\": %.6g, \"unit\": \"GFLOP/s\"}\n", err, tolerance,
                 tk > t1 ? 2.0 * (double)a.nnz * (iters - 1) / (tk - t1) / 1e9 : 2.0 * (double)a.nnz * iters / tk / 1e9);
        free(a.row); free(a.col); free(a.val); free(x); free(y);
    }
}

int main(void) {
    const char *inputs = getenv("HPCQ_INPUTS"), *out = getenv("HPCQ_EVAL_REPORT"), *stage = getenv("HPCQ_STAGE"), *node = getenv("HPCQ_NODE");
    if (!inputs || !out || !node) {
        fprintf(stderr, "driver: HPCQ_INPUTS, HPCQ_EVAL_REPORT and HPCQ_NODE must be set (it runs as hpcq's evaluate phase)\n");
        return 2;
    }
    int quick = stage && strcmp(stage, "quick") == 0;
    int repeats = getenv("HPCQ_REPEATS") ? atoi(getenv("HPCQ_REPEATS")) : 0;
    if (repeats <= 0) repeats = 5;
    char prog[4096];
    snprintf(prog, sizeof prog, "%s/spmv", node);
    char *list = strdup(inputs);
    for (char *in = strtok(list, "\n"); in; in = strtok(NULL, "\n")) {
        int n, k, iters;
        if (sscanf(in, "N=%d,NNZ=%d,ITERS=%d", &n, &k, &iters) != 3 || n < 1 || n > 50000000 || k < 1 || k > 1000 || iters < 2) {
            fprintf(stderr, "driver: input %s: want N=<rows>,NNZ=<per row, 1..1000>,ITERS=<2 or more>\n", in);
            return 2;
        }
        measure(prog, in, n, k, iters, repeats, quick);
    }
    FILE *f = fopen(out, "w"); /* once every child has ended: only these lines count */
    if (!f || fwrite(report, 1, reportLen, f) != reportLen || fclose(f)) { perror(out); return 2; }
    return 0;
}
