// Tiled single-precision matrix multiply in CUDA (shared-memory tiles).
// Usage: matmul [N]. Prints GFLOP/s, time and the max error as METRIC lines.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define TILE 16
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void matmul(const float *a, const float *b, float *c, int n) {
    __shared__ float ta[TILE][TILE], tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int t = 0; t < (n + TILE - 1) / TILE; t++) {
        int ac = t * TILE + threadIdx.x, br = t * TILE + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < n && ac < n) ? a[row * n + ac] : 0;
        tb[threadIdx.y][threadIdx.x] = (br < n && col < n) ? b[br * n + col] : 0;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = acc;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (long i = 0; i < (long)n * n; i++) { a[i] = 1.0f; b[i] = 2.0f; }
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    cudaEvent_t t0, t1; cudaEventCreate(&t0); cudaEventCreate(&t1);
    cudaEventRecord(t0);
    matmul<<<grid, block>>>(da, db, dc, n);
    cudaEventRecord(t1);
    CHECK(cudaGetLastError());
    CHECK(cudaEventSynchronize(t1));
    float ms; cudaEventElapsedTime(&ms, t0, t1);
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    double maxerr = 0;
    for (long i = 0; i < (long)n * n; i++) maxerr = fmax(maxerr, fabs(c[i] - 2.0 * n));
    printf("n=%d\n", n);
    printf("METRIC gflops=%.3f GFLOP/s\n", 2.0 * n * n * (double)n / (ms / 1e3) / 1e9);
    printf("METRIC time_s=%.6f s\n", ms / 1e3);
    printf("METRIC max_error=%.3e\n", maxerr);
    return maxerr > 1e-3 ? 1 : 0;
}
