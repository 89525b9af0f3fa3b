/* The reference Jacobi of the stencil-omp harness: the plain 5-point
 * update, one sweep after another, every edge point held. */
double *reference_jacobi(int n, int iters, double *a, double *b) {
    for (int it = 0; it < iters; it++) {
        #pragma omp parallel for
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                b[(long)i * n + j] = 0.25 * (a[(long)(i - 1) * n + j] + a[(long)(i + 1) * n + j] + a[(long)i * n + j - 1] + a[(long)i * n + j + 1]);
        double *t = a;
        a = b;
        b = t;
    }
    return a;
}
