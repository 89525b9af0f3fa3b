// 2-D Jacobi heat stencil (5-point) with OpenMP.
// Usage: stencil [N] [ITERS]. Prints GFLOP/s and time as METRIC lines.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    if (n < 3 || iters < 1) { fprintf(stderr, "usage: stencil [N>=3] [ITERS>=1]\n"); return 2; }
    double *a = calloc((size_t)n * n, sizeof *a);
    double *b = calloc((size_t)n * n, sizeof *b);
    if (!a || !b) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int j = 0; j < n; j++) a[j] = b[j] = 1.0; /* hot top edge */
    double t0 = omp_get_wtime();
    for (int it = 0; it < iters; it++) {
        #pragma omp parallel for schedule(static)
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                b[i * n + j] = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] + a[i * n + j + 1]);
        double *t = a; a = b; b = t;
    }
    double secs = omp_get_wtime() - t0;
    double sum = 0;
    for (long i = 0; i < (long)n * n; i++) sum += a[i];
    /* 4 flops per updated point: 3 additions, 1 multiplication */
    double gflops = 4.0 * (n - 2) * (double)(n - 2) * iters / secs / 1e9;
    printf("threads=%d n=%d iters=%d checksum=%.6f\n", omp_get_max_threads(), n, iters, sum);
    printf("METRIC gflops=%.4f GFLOP/s\n", gflops);
    printf("METRIC time_s=%.6f s\n", secs);
    printf("METRIC threads=%d\n", omp_get_max_threads());
    free(a); free(b);
    return 0;
}
