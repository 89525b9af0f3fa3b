// 2-D Jacobi heat stencil (5-point) on one GPU, double precision, the top
// edge held at 1.0. Usage: stencil [N] [ITERS] [BX] [BY] (thread block BX x BY).
// Prints GFLOP/s (4 flops per updated point), the time, the effective memory
// bandwidth (one read and one write per point) and a checksum as METRIC lines.
// Built with -DUSE_LDG, the neighbours are read through the read-only cache.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void jacobi(const double *__restrict__ in, double *__restrict__ out, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || j < 1 || i >= n - 1 || j >= n - 1) return;
    size_t k = (size_t)i * n + j;
#ifdef USE_LDG
    out[k] = 0.25 * (__ldg(&in[k - n]) + __ldg(&in[k + n]) + __ldg(&in[k - 1]) + __ldg(&in[k + 1]));
#else
    out[k] = 0.25 * (in[k - n] + in[k + n] + in[k - 1] + in[k + 1]);
#endif
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 500;
    int bx = argc > 3 ? atoi(argv[3]) : 16;
    int by = argc > 4 ? atoi(argv[4]) : 16;
    if (n < 3 || iters < 1 || bx < 1 || by < 1 || bx * by > 1024) {
        fprintf(stderr, "usage: stencil [N>=3] [ITERS>=1] [BX] [BY], BX*BY <= 1024\n");
        return 2;
    }
    size_t nn = (size_t)n * n, bytes = nn * sizeof(double);
    double *h = (double *)calloc(nn, sizeof(double));
    if (!h) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int j = 0; j < n; j++) h[j] = 1.0;
    double *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, h, bytes, cudaMemcpyHostToDevice));
    dim3 block(bx, by), grid((n + bx - 1) / bx, (n + by - 1) / by);
    jacobi<<<grid, block>>>(b, a, n);  // warm-up: a one sweep from b, both the start
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    CHECK(cudaEventRecord(t0));
    for (int it = 0; it < iters; it++) {
        jacobi<<<grid, block>>>(a, b, n);
        double *t = a; a = b; b = t;
    }
    CHECK(cudaEventRecord(t1));
    CHECK(cudaGetLastError());
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    CHECK(cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (size_t k = 0; k < nn; k++) sum += h[k];
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    double pts = (double)(n - 2) * (n - 2) * iters, s = ms / 1e3;
    printf("device=%s n=%d iters=%d block=%dx%d checksum=%.9e\n", p.name, n, iters, bx, by, sum);
    printf("METRIC gflops=%.3f GFLOP/s\n", 4.0 * pts / s / 1e9);
    printf("METRIC time_s=%.6f s\n", s);
    printf("METRIC bandwidth_gbs=%.1f GB/s\n", 16.0 * pts / s / 1e9);
    printf("METRIC checksum=%.9e\n", sum);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    free(h);
    return 0;
}
