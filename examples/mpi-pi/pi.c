// Computes pi by the midpoint rule over MPI ranks; rank 0 prints METRIC lines.
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = 10000000; double h = 1.0 / n, sum = 0;
    double t0 = MPI_Wtime();
    for (long i = rank; i < n; i += size) { double x = h * (i + 0.5); sum += 4.0 / (1.0 + x * x); }
    double pi = 0; sum *= h;
    MPI_Reduce(&sum, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (rank == 0) { printf("ranks=%d pi=%.12f\n", size, pi); printf("METRIC pi_error=%.3e\n", pi > 3.141592653589793 ? pi - 3.141592653589793 : 3.141592653589793 - pi); printf("METRIC seconds=%.6f s\n", t); }
    MPI_Finalize(); return 0;
}
