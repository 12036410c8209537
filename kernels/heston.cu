// Heston calibration kernels: one launch sequence evaluates the objective for a whole population (fp64).
//   heston_terms:  a thread per (maturity, member, point): psi at the 4 control points and the J = NODES nodes
//                  (TERM_TASKS (maturity, member) tasks per block, meeting in shared memory), then the
//                  control variance and the J strike-free factors.
//   heston_errors: one thread per quote and GROUP members; weighted squared vega-scaled errors summed per
//                  block in a fixed tree order -> partial[member][block].
//   heston_sums:   one thread per member: the blocks' partials in order (non-finite -> +inf).
//   heston_prices: one thread per quote and GROUP members: the calls themselves, [member][quote].
// Sums never use atomics: a population gives the same objective on every run.
// Compile options (set by the launcher): -DBLOCK (threads per block of heston_errors), -DGROUP, -DNODES,
// -DTERM_TASKS.
#include "heston.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef GROUP
#define GROUP 8
#endif
#ifndef NODES
#define NODES 20
#endif
#ifndef TERM_TASKS
#define TERM_TASKS 4
#endif
#define TERM_THREADS (TERM_TASKS * (HESTON_CONTROLS + NODES))

extern "C" __global__ void __launch_bounds__(TERM_THREADS)
heston_terms(const double* params, int members, const double* times, int terms, const double* nodes,
             const double* weights, double* variance, double* factor_re, double* factor_im)
{
    constexpr int points = HESTON_CONTROLS + NODES;
    __shared__ Complex psi[TERM_TASKS][points];
    const int task = threadIdx.x / points, k = threadIdx.x % points;
    const int index = blockIdx.x * TERM_TASKS + task;   // (maturity, member) = (index / members, index % members)
    const int m = index / members, p = index % members;
    const bool live = index < terms * members;
    if (live) psi[task][k] = heston_characteristic(heston_point(k, nodes), times[m], heston_member(params, p));
    __syncthreads();
    if (!live || k < HESTON_CONTROLS) return;
    const double s = heston_control_variance(psi[task]);
    const int j = k - HESTON_CONTROLS;
    if (j == 0) variance[index] = s;
    const Complex c = (weights[j] / HESTON_PI) * heston_correction(nodes[j], s, psi[task][k]);
    const int at = (m * NODES + j) * members + p;
    factor_re[at] = c.re;
    factor_im[at] = c.im;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
heston_errors(int members, int quotes, const int* term, const double* variance, const double* factor_re,
              const double* factor_im, int n_nodes, const double* cosines, const double* sines,
              const double* log_strike, const double* strike, const double* market, const double* vega,
              const double* weight, double* partial)
{
    __shared__ double sums[GROUP][BLOCK];
    const int lane = threadIdx.x;
    const int q = blockIdx.x * BLOCK + lane;
    const int p0 = blockIdx.y * GROUP;
    double errors[GROUP];
    if (q < quotes) {
        heston_quote_errors<GROUP>(q, p0, members, quotes, term, variance, factor_re, factor_im, n_nodes, cosines,
                                   sines, log_strike, strike, market, vega, weight, errors);
        for (int g = 0; g < GROUP; ++g) sums[g][lane] = errors[g];
    } else {
        for (int g = 0; g < GROUP; ++g) sums[g][lane] = 0.0;
    }
    __syncthreads();
    for (int width = BLOCK / 2; width > 0; width /= 2) {
        if (lane < width) {
            for (int g = 0; g < GROUP; ++g) sums[g][lane] += sums[g][lane + width];
        }
        __syncthreads();
    }
    if (lane < GROUP && p0 + lane < members) {
        partial[(p0 + lane) * gridDim.x + blockIdx.x] = sums[lane][0];
    }
}

extern "C" __global__ void heston_sums(int members, int blocks, const double* partial, double* objective)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= members) return;
    double f = 0.0;
    for (int b = 0; b < blocks; ++b) f += partial[p * blocks + b];
    objective[p] = isfinite(f) ? f : __longlong_as_double(0x7ff0000000000000LL);   // +inf
}

extern "C" __global__ void heston_prices(int members, int quotes, const int* term, const double* variance,
                                         const double* factor_re, const double* factor_im, int n_nodes,
                                         const double* cosines, const double* sines, const double* log_strike,
                                         const double* strike, double* prices)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    const int p0 = blockIdx.y * GROUP;
    if (q >= quotes) return;
    double calls[GROUP];
    heston_quote_calls<GROUP>(q, p0, members, quotes, term, variance, factor_re, factor_im, n_nodes, cosines,
                              sines, log_strike, strike, calls);
    for (int g = 0; g < GROUP && p0 + g < members; ++g) prices[(p0 + g) * quotes + q] = calls[g];
}
