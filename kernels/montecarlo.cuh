// The arithmetic of one Monte-Carlo path (Sobol -> AS241 -> Brownian bridge -> Black-Scholes -> payoff),
// shared by the CUDA kernel (kernels/montecarlo.cu) and a host build that the tests compare with the CPU
// engine. Everything here is __host__ __device__; compiled with -DREAL=double or -DREAL=float and the
// job's shape as constants: MC_UNDERLYINGS (U), MC_SLOTS (bridge registers), MC_CONTRACT (1, 2, 3).
//
// Arithmetic follows distprice/montecarlo/cpu.py operation by operation (same order, no fused multiply-add
// on the host), so that a host build gives the CPU engine's payoffs bit for bit: exp and log are written
// out as in distprice/montecarlo/elementary.py (float64 arithmetic, rounded for float), and paths are
// followed as y = log(S / S0) in fp64 jobs (`logarithmic`), as S = S0 * prod exp(...) in fp32 jobs.
#pragma once

#ifndef __CUDACC__
#include <cmath>
#define __host__
#define __device__
#endif

#ifndef REAL
#define REAL double
#endif
#ifndef MC_UNDERLYINGS
#define MC_UNDERLYINGS 1
#endif
#ifndef MC_SLOTS
#define MC_SLOTS 2
#endif
#ifndef MC_CONTRACT
#define MC_CONTRACT 1
#endif
#ifndef MC_THREADS
#define MC_THREADS 256
#endif
typedef REAL real;

// Bits of a path's offset t < MC_THREADS in its block (MC_THREADS is a power of two).
constexpr int mc_log2(int n) { return n > 1 ? 1 + mc_log2(n / 2) : 0; }
constexpr int MC_LOW_BITS = mc_log2(MC_THREADS);

// The kernel's arguments, declared once: the launcher (distprice/montecarlo/gpu.py) and the host build's
// test read this list to pass the arguments in this order and with these types.
//   directions [dims][bits] Sobol direction numbers, row d = step * U + underlying
//   slot, left_slot, right_slot [T]: bridge step i writes register slot[i] from left_slot[i] (0: none)
//     and right_slot[i]; emit_start [T + 1], emit_slots [T]: dates complete after step i (ascending)
//   sd, lw, rw [T] bridge weights; spots [M][U]; vol, drift [M][T][U]; chol [M][U][U] lower triangular
//   disc [M][cashflows]; detval [M][detvals]; terms: the contract's terms (contracts.py layout)
//   logarithmic: follow paths as log(S / S0) (1) or S (0); thresholds [M][U]: the levels the contract
//   observes at every date, as log(level / S0) or as levels (contracts.py, `thresholds`)
//   elementary: exp and log (elementary.py layout, double); constants: AS241 (normal.py layout, real)
//   scale = 2^-bits; paths k = first .. first + count - 1 of a job of `paths` paths (batch of path k =
//   k * 32 / paths)
#define MC_FIELDS(X)                  \
    X(const unsigned int*, directions) \
    X(int, bits)                      \
    X(int, dates)                     \
    X(const int*, slot)               \
    X(const int*, left_slot)          \
    X(const int*, right_slot)         \
    X(const int*, emit_start)         \
    X(const int*, emit_slots)         \
    X(const real*, sd)                \
    X(const real*, lw)                \
    X(const real*, rw)                \
    X(const real*, spots)             \
    X(const real*, vol)               \
    X(const real*, drift)             \
    X(const real*, chol)              \
    X(const real*, disc)              \
    X(int, cashflows)                 \
    X(const real*, detval)            \
    X(int, detvals)                   \
    X(const real*, terms)             \
    X(int, logarithmic)               \
    X(const real*, thresholds)        \
    X(const double*, elementary)      \
    X(const real*, constants)         \
    X(real, scale)                    \
    X(long long, first)               \
    X(long long, count)               \
    X(long long, paths)

#define MC_PARAM(type, name) type name,
#define MC_MEMBER(type, name) type name;
#define MC_NAME(type, name) name,

struct McJob {
    MC_FIELDS(MC_MEMBER)
};

#define MC_BATCHES 32

// Bit casts between a double and its IEEE-754 pattern.
__host__ __device__ inline long long mc_bits(double x)
{
#ifdef __CUDA_ARCH__
    return __double_as_longlong(x);
#else
    long long i;
    __builtin_memcpy(&i, &x, sizeof i);
    return i;
#endif
}

__host__ __device__ inline double mc_from_bits(long long i)
{
#ifdef __CUDA_ARCH__
    return __longlong_as_double(i);
#else
    double x;
    __builtin_memcpy(&x, &i, sizeof x);
    return x;
#endif
}

// exp and log (elementary.py): offsets of the constants, Estrin's scheme for the polynomials.
enum { EL_TAYLOR = 0, EL_ATANH = 14, EL_LOG2E = 26, EL_SHIFTER, EL_LN2_HI, EL_LN2_LO, EL_SQRT_HALF, EL_EXP_MIN,
       EL_EXP_MAX, EL_ONE };

__host__ __device__ inline double el_estrin(const double* c, int k, double x, double high)
{
    const double x2 = x * x;
    const double x4 = x2 * x2;
    const double low = (c[k] + c[k + 1] * x) + (c[k + 2] + c[k + 3] * x) * x2;
    const double middle = (c[k + 4] + c[k + 5] * x) + (c[k + 6] + c[k + 7] * x) * x2;
    const double upper = (c[k + 8] + c[k + 9] * x) + (c[k + 10] + c[k + 11] * x) * x2;
    return (low + middle * x4) + (upper + high * x4) * (x4 * x4);
}

__host__ __device__ inline double mc_exp(const double* c, double x)
{
    x = x > c[EL_EXP_MIN] || x != x ? x : c[EL_EXP_MIN];
    x = x < c[EL_EXP_MAX] || x != x ? x : c[EL_EXP_MAX];
    const double t = x * c[EL_LOG2E] + c[EL_SHIFTER];
    const double k = t - c[EL_SHIFTER];
    const double r = (x - k * c[EL_LN2_HI]) - k * c[EL_LN2_LO];
    const double p = el_estrin(c, EL_TAYLOR, r, c[EL_TAYLOR + 12] + c[EL_TAYLOR + 13] * r);
    return p * mc_from_bits((mc_bits(t) - mc_bits(c[EL_SHIFTER]) + 1023) << 52);
}

__host__ __device__ inline double mc_log(const double* c, double x)
{
    const long long i = mc_bits(x);
    const long long k = (i - mc_bits(c[EL_SQRT_HALF])) >> 52;
    const double m = mc_from_bits(i - (long long)((unsigned long long)k << 52));
    const double s = (m - c[EL_ONE]) / (m + c[EL_ONE]);
    const double series = el_estrin(c, EL_ATANH, s * s, 0.0);
    const double kf = mc_from_bits(mc_bits(c[EL_SHIFTER]) + k) - c[EL_SHIFTER];
    return kf * c[EL_LN2_HI] + (s * series + kf * c[EL_LN2_LO]);
}

__host__ __device__ inline float mc_exp(const double* c, float x) { return (float)mc_exp(c, (double)x); }
__host__ __device__ inline float mc_log(const double* c, float x) { return (float)mc_log(c, (double)x); }
__host__ __device__ inline float mc_sqrt(float x) { return sqrtf(x); }
__host__ __device__ inline double mc_sqrt(double x) { return sqrt(x); }

// x_n[d] by the independent formula: XOR of directions[d][b] over the set bits b of gray(n).
__host__ __device__ inline unsigned int sobol_point(const unsigned int* directions, int bits, long long n, int d)
{
    unsigned long long g = (unsigned long long)(n ^ (n >> 1));
    unsigned int x = 0;
    for (int b = 0; g; ++b, g >>= 1)
        if (g & 1) x ^= directions[d * bits + b];
    return x;
}

// Row d of a block's Sobol tables (paths n0 .. n0 + MC_THREADS - 1, n0 a multiple of MC_THREADS): x_{n0}[d]
// into base[d], and the direction numbers of the low bits into low[d][MC_LOW_BITS] (0 past `bits`).
__host__ __device__ inline void sobol_block_row(const unsigned int* directions, int bits, long long n0, int d,
                                                unsigned int* base, unsigned int* low)
{
    base[d] = sobol_point(directions, bits, n0, d);
    for (int b = 0; b < MC_LOW_BITS; ++b) low[d * MC_LOW_BITS + b] = b < bits ? directions[d * bits + b] : 0u;
}

// AS241 (PPND16); offsets of the constants as in normal.py.
enum { AS_CENTRAL = 0, AS_NEAR = 16, AS_FAR = 32, AS_HALF = 48, AS_SPLIT_Q, AS_CENTRAL_SHIFT, AS_NEAR_SHIFT,
       AS_FAR_SPLIT, AS_ONE };

__host__ __device__ inline real as241_ratio(const real* c, int k, real x)
{
    real top = c[k + 7] * x + c[k + 6];
    real bottom = c[k + 15] * x + c[k + 14];
    for (int i = 5; i >= 0; --i) {
        top = top * x + c[k + i];
        bottom = bottom * x + c[k + 8 + i];
    }
    return top / bottom;
}

// Phi^-1(u); the radius from the exp/log constants `e`; +-infinity at u = 0 and 1 (normal.py, `tail`).
__host__ __device__ inline real ppnd16(real u, const real* c, const double* e)
{
    const real q = u - c[AS_HALF];
    if ((q < 0 ? -q : q) <= c[AS_SPLIT_Q]) return q * as241_ratio(c, AS_CENTRAL, c[AS_CENTRAL_SHIFT] - q * q);
    const real r = mc_sqrt(-mc_log(e, q < 0 ? u : c[AS_ONE] - u));
    real z;
    if (r <= c[AS_FAR_SPLIT])
        z = as241_ratio(c, AS_NEAR, r - c[AS_NEAR_SHIFT]);
    else if (u == 0 || u == c[AS_ONE])
        z = (real)mc_from_bits(0x7ff0000000000000LL);
    else
        z = as241_ratio(c, AS_FAR, r - c[AS_FAR_SPLIT]);
    return q < 0 ? -z : z;
}

__host__ __device__ inline real worst(const real* s, const real* levels)
{
    real w = s[0] / levels[0];
    for (int j = 1; j < MC_UNDERLYINGS; ++j) {
        const real v = s[j] / levels[j];
        w = v < w ? v : w;
    }
    return w;
}

// What a contract keeps while a path's dates go by, and its payoff (contracts.py, `observe`, `settle`).
struct Payoff {
    int called;     // contract 2: the date of the early call (-1: none)
    bool touched;   // contract 3: a barrier was touched
    double value;

    __host__ __device__ Payoff() : called(-1), touched(false), value(0.0) {}

    // Date t seen from the level of each underlying (S, or log(S / S0)) and the thresholds in its terms.
    __host__ __device__ void observe(const McJob& job, int m, int t, const real* level)
    {
#if MC_CONTRACT == 2
        const real* threshold = job.thresholds + m * MC_UNDERLYINGS;
        if (called < 0 && t < job.dates - 1) {
            bool hit = true;
            for (int j = 0; j < MC_UNDERLYINGS; ++j) hit = hit & (level[j] >= threshold[j]);
            if (hit) called = t;
        }
#elif MC_CONTRACT == 3
        const real* threshold = job.thresholds + m * MC_UNDERLYINGS;
        for (int j = 0; j < MC_UNDERLYINGS; ++j)
            if (level[j] <= threshold[j]) touched = true;
#endif
    }

    // The payoff from the prices S at the last date.
    __host__ __device__ void settle(const McJob& job, int m, const real* s)
    {
        const real* disc = job.disc + m * job.cashflows;
        const real* terms = job.terms;
#if MC_CONTRACT == 1
        const real amount = (s[0] - terms[0]) * job.detval[m * job.detvals];
        value = amount > 0 ? (double)(amount * disc[0]) : 0.0;
#elif MC_CONTRACT == 2
        const int U = MC_UNDERLYINGS, last = job.dates - 1;
        const real w = worst(s, terms);
        if (called >= 0) {
            value = (double)(terms[U + called] * disc[called]);
            return;
        }
        const real notional = terms[U + last + 1];
        const real amount = w >= 1 ? terms[U + last] : (w > terms[U + last + 2] ? notional : w * notional);
        value = (double)(amount * disc[last]);
#else
        const int U = MC_UNDERLYINGS;
        bool below = false;
        for (int j = 0; j < U; ++j)
            if (s[j] < terms[j]) below = true;
        const real notional = terms[2 * U + 1];
        const real amount = touched && below ? notional * worst(s, terms) : notional;
        value = (double)(terms[2 * U] * disc[0] + amount * disc[1]);
#endif
    }
};

// The payoff of the path with Sobol index n = n0 + t under model m, from its block's Sobol tables
// (sobol_block_row): x_n = x_{n0} XOR x_t, the low part x_t summed from the low bits' direction numbers.
// The bridge keeps W in MC_SLOTS registers; dates are taken in ascending order as they complete.
__host__ __device__ inline double path_payoff(const McJob& job, int m, const unsigned int* base,
                                              const unsigned int* low, unsigned int t)
{
    const int U = MC_UNDERLYINGS;
    const unsigned int gray = t ^ (t >> 1);
    real w[MC_SLOTS][MC_UNDERLYINGS];
    real prev[MC_UNDERLYINGS], growth[MC_UNDERLYINGS], level[MC_UNDERLYINGS], s[MC_UNDERLYINGS];
    real dw[MC_UNDERLYINGS];
    for (int j = 0; j < U; ++j) {
        w[0][j] = 0;
        prev[j] = 0;
        growth[j] = 1;
        level[j] = 0;
    }
    Payoff payoff;
    for (int i = 0; i < job.dates; ++i) {
        for (int j = 0; j < U; ++j) {
            const int d = i * U + j;
            unsigned int x = base[d];
            const unsigned int* v = low + d * MC_LOW_BITS;
#pragma unroll
            for (int b = 0; b < MC_LOW_BITS; ++b) x ^= (gray >> b & 1u) ? v[b] : 0u;
            real u = (real)x;
            const real z = ppnd16(u * job.scale, job.constants, job.elementary);
            real value;
            if (i == 0) {
                value = job.sd[0] * z;
            } else {
                value = job.rw[i] * w[job.right_slot[i]][j] + job.sd[i] * z;
                if (job.left_slot[i] != 0) value = value + job.lw[i] * w[job.left_slot[i]][j];
            }
            w[job.slot[i]][j] = value;
        }
        for (int date = job.emit_start[i]; date < job.emit_start[i + 1]; ++date) {
            const real* now = w[job.emit_slots[date]];
            for (int j = 0; j < U; ++j) {
                dw[j] = now[j] - prev[j];
                prev[j] = now[j];
            }
            const int at = (m * job.dates + date) * U;
            for (int j = 0; j < U; ++j) {
                const real* L = job.chol + (m * U + j) * U;
                real eps = L[0] * dw[0];
                for (int l = 1; l <= j; ++l) eps = eps + L[l] * dw[l];
                const real increment = eps * job.vol[at + j] + job.drift[at + j];
                if (job.logarithmic) {
                    level[j] = level[j] + increment;
                } else {
                    growth[j] = growth[j] * mc_exp(job.elementary, increment);
                    level[j] = job.spots[m * U + j] * growth[j];
                }
            }
            payoff.observe(job, m, date, level);
            if (date == job.dates - 1) {
                for (int j = 0; j < U; ++j)
                    s[j] = job.logarithmic ? job.spots[m * U + j] * mc_exp(job.elementary, level[j]) : level[j];
                payoff.settle(job, m, s);
            }
        }
    }
    return payoff.value;
}

// Batch of path k (0-based) in a job of `paths` paths.
__host__ __device__ inline int batch_of(long long k, long long paths) { return (int)(k * MC_BATCHES / paths); }
