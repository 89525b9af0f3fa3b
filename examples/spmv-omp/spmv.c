// Sparse matrix-vector products: x <- A x, ITERS times, A in CSR.
// Usage: spmv MATRIX X ITERS OUT (formats: the idea's README).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

static void *readAll(FILE *f, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "short file\n"); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: spmv MATRIX X ITERS OUT\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    char magic[4];
    int32_t n;
    int64_t nnz;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "CSR1", 4) || fread(&n, 4, 1, f) != 1 || fread(&nnz, 8, 1, f) != 1) {
        fprintf(stderr, "%s: not a CSR1 file\n", argv[1]);
        return 1;
    }
    int64_t *row = readAll(f, sizeof(int64_t) * ((size_t)n + 1));
    int32_t *col = readAll(f, sizeof(int32_t) * (size_t)nnz);
    double *val = readAll(f, sizeof(double) * (size_t)nnz);
    fclose(f);
    f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    double *x = readAll(f, sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    fclose(f);
    int iters = atoi(argv[3]);
    double t0 = omp_get_wtime();
    for (int it = 0; it < iters; it++) {
        #pragma omp parallel for schedule(static)
        for (int32_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t p = row[i]; p < row[i + 1]; p++) s += val[p] * x[col[p]];
            y[i] = s;
        }
        double *t = x; x = y; y = t;
    }
    double secs = omp_get_wtime() - t0;
    f = fopen(argv[4], "wb");
    if (!f || fwrite(x, sizeof(double), (size_t)n, f) != (size_t)n || fclose(f)) { perror(argv[4]); return 1; }
    printf("METRIC gflops=%.4f GFLOP/s\n", 2.0 * (double)nnz * iters / secs / 1e9);
    return 0;
}
