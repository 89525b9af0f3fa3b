// Holds a GPU for SECONDS of wall time (short kernels one after another), then
// prints when it started and ended on the host's clock as METRIC lines, so that
// a check can see which tasks were on the device at once.
// Usage: spin [SECONDS].
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void busy(long long cycles, int *out) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    out[0] = 1;
}

static double now() {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 5;
    int *d = 0;
    cudaError_t e = cudaMalloc(&d, sizeof(int));
    if (e != cudaSuccess) {
        fprintf(stderr, "spin: no CUDA device: %s\n", cudaGetErrorString(e));
        return 1;
    }
    double t0 = now();
    long kernels = 0;
    while (now() - t0 < secs) {
        busy<<<1, 1>>>(1000000, d);
        if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
            fprintf(stderr, "spin: %s\n", cudaGetErrorString(e));
            return 1;
        }
        kernels++;
    }
    double t1 = now();
    printf("visible=%s kernels=%ld\n", getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "(unset)", kernels);
    printf("METRIC t_start=%.3f s\nMETRIC t_end=%.3f s\nMETRIC kernels=%ld\n", t0, t1, kernels);
    cudaFree(d);
    return 0;
}
