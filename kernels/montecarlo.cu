// MC: the Monte-Carlo pricer, one path per thread, a block per aligned chunk of MC_THREADS paths.
//
// Why this shape (the floor). A path costs D = T*U normals; each normal is an AS241 rational (two degree-7
// polynomials and a division; a log and a square root in the 15 % of tails, and since a warp of 32 paths
// nearly always holds a tail, every warp pays both branches), a bridge step (3 multiply-adds) and, in fp32
// jobs, an exp (fp64 jobs sum log-increments and take U exps per path, at the last date); about 200
// double-precision instructions per path-date-underlying (PDU). The large set (2^17 paths,
// 1101 PDU each, 1.4e8 PDU) is then ~3e10 fp64 instructions: 1.7 ms at an H100's ~1.7e13 fp64 instr/s. The
// data each path reads (market rows per date, directions) are the same for every path and stay in L1/L2;
// what each path writes is one number. So the kernel is compute-bound, and the floor is arithmetic,
// provided nothing per path goes to memory:
//   - The bridge: kept as the whole W[T][U] (8.8 KB per path for the large set), 2^17 paths would move
//     2.3 GB through local memory, 0.7 ms at full bandwidth and more in practice. The depth-first bridge
//     only ever needs the W of the current step's ancestors, so the host schedules it into MC_SLOTS
//     registers (about log2(T) + 2: 10 for T = 367) and hands out each date's increment as soon as all
//     earlier dates are complete; paths and payoff then stream over the dates in order.
//   - Sobol: a thread walking consecutive paths by the recurrence would keep x_n (D words: 4.4 KB) per
//     thread. Instead a block takes MC_THREADS consecutive Sobol indices n0 .. n0 + MC_THREADS - 1 with n0 a
//     multiple of MC_THREADS, so that x_{n0 + t} = x_{n0} XOR x_t: the block computes x_{n0} once into
//     shared memory (D words) beside the direction numbers of the log2(MC_THREADS) low bits (D words each),
//     and each thread XORs in those of the set bits of gray(t) (integer work beside the fp64 pipe). Read
//     from shared memory, not through L1 from the whole direction table (D x bits words, which L1 cannot
//     hold): on an H100 the large set's kernel takes 3.2 ms that way and 1.4 ms without the low part.
// One path per thread (rather than a block cooperating on one path) because the steps of a path are a
// chain (bridge, product over dates, first-passage payoffs) with little parallelism inside, while paths
// are plenty (2^17 and more). Models (grid.y) are priced apart, each recomputing the normals.
//
// Output: per block and model, the payoffs summed in float64 (also in fp32 builds) by a fixed tree, in
// two parts: paths in the batch of the block's first path and paths in the next batch (the launcher makes
// blocks no longer than a batch). The launcher adds the blocks in order, so the result is deterministic.
#include "montecarlo.cuh"

extern "C" __global__ void __launch_bounds__(MC_THREADS) mc_batch_sums(MC_FIELDS(MC_PARAM) double* sums)
{
    const McJob job{MC_FIELDS(MC_NAME)};
    extern __shared__ unsigned int base[];   // [dims] x_{n0}, then low [dims][MC_LOW_BITS]
    __shared__ double part[2][MC_THREADS];
    const int dims = dates * MC_UNDERLYINGS;
    unsigned int* low = base + dims;
    const long long n0 = ((first + 1) / MC_THREADS + blockIdx.x) * (long long)MC_THREADS;
    for (int d = threadIdx.x; d < dims; d += MC_THREADS) sobol_block_row(directions, bits, n0, d, base, low);
    __syncthreads();

    const long long k = n0 + threadIdx.x - 1;
    const bool active = k >= first && k < first + count;
    const double value = active ? path_payoff(job, blockIdx.y, base, low, threadIdx.x) : 0.0;
    const long long lowest = n0 - 1 > first ? n0 - 1 : first;
    const bool later = active && batch_of(k, paths) != batch_of(lowest, paths);
    part[0][threadIdx.x] = later ? 0.0 : value;
    part[1][threadIdx.x] = later ? value : 0.0;
    for (int half = MC_THREADS / 2; half > 0; half /= 2) {
        __syncthreads();
        if (threadIdx.x < half) {
            part[0][threadIdx.x] += part[0][threadIdx.x + half];
            part[1][threadIdx.x] += part[1][threadIdx.x + half];
        }
    }
    if (threadIdx.x == 0) {
        double* out = sums + 2 * ((long long)blockIdx.y * gridDim.x + blockIdx.x);
        out[0] = part[0][0];
        out[1] = part[1][0];
    }
}
