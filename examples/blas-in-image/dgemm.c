// Dense matrix multiply C = A * B (double, N x N): a naive OpenMP loop
// against OpenBLAS's cblas_dgemm. Usage: dgemm [N] [REPS].
// Prints GFLOP/s of both and their agreement as METRIC lines.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static void naive(int n, const double *a, const double *b, double *c) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double aik = a[(size_t)i * n + k];
            for (int j = 0; j < n; j++)
                c[(size_t)i * n + j] += aik * b[(size_t)k * n + j];
        }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 512;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 1 || reps < 1) { fprintf(stderr, "usage: dgemm [N>=1] [REPS>=1]\n"); return 2; }
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b);
    double *c1 = calloc(nn, sizeof *c1), *c2 = calloc(nn, sizeof *c2);
    if (!a || !b || !c1 || !c2) { fprintf(stderr, "out of memory\n"); return 1; }
    srand(1);
    for (size_t i = 0; i < nn; i++) { a[i] = rand() / (double)RAND_MAX; b[i] = rand() / (double)RAND_MAX; }

    double t0 = omp_get_wtime();
    naive(n, a, b, c1);
    double naive_s = omp_get_wtime() - t0;

    double blas_s = 1e30;
    for (int r = 0; r < reps; r++) {
        t0 = omp_get_wtime();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c2, n);
        double s = omp_get_wtime() - t0;
        if (s < blas_s) blas_s = s;
    }
    double err = 0;
    for (size_t i = 0; i < nn; i++) err = fmax(err, fabs(c1[i] - c2[i]));
    double flops = 2.0 * n * (double)n * n;
    printf("n=%d threads=%d naive_s=%.4f blas_s=%.4f max_abs_diff=%.3g\n", n, omp_get_max_threads(), naive_s, blas_s, err);
    printf("METRIC gflops=%.3f GFLOP/s\n", flops / blas_s / 1e9);
    printf("METRIC naive_gflops=%.3f GFLOP/s\n", flops / naive_s / 1e9);
    printf("METRIC speedup=%.2f\n", naive_s / blas_s);
    free(a); free(b); free(c1); free(c2);
    return err > 1e-6 * n ? 3 : 0;
}
