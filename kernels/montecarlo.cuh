// The arithmetic of one Monte-Carlo path (Sobol -> AS241 -> Brownian bridge -> Black-Scholes -> payoff),
// shared by the CUDA kernel (kernels/montecarlo.cu) and a host build that the tests compare with the CPU
// engine. Everything here is __host__ __device__; compiled with -DREAL=double or -DREAL=float and the
// job's shape as constants: MC_UNDERLYINGS (U), MC_SLOTS (bridge registers), MC_CONTRACT (1, 2, 3).
//
// Arithmetic follows distprice/montecarlo/cpu.py operation by operation (same order, no fused multiply-add
// on the host), so that a host build gives the CPU engine's payoffs bit for bit.
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
typedef REAL real;

// The kernel's arguments, declared once: the launcher (distprice/montecarlo/gpu.py) and the host build's
// test read this list to pass the arguments in this order and with these types.
//   directions [dims][bits] Sobol direction numbers, row d = step * U + underlying
//   slot, left_slot, right_slot [T]: bridge step i writes register slot[i] from left_slot[i] (0: none)
//     and right_slot[i]; emit_start [T + 1], emit_slots [T]: dates complete after step i (ascending)
//   sd, lw, rw [T] bridge weights; spots [M][U]; vol, drift [M][T][U]; chol [M][U][U] lower triangular
//   disc [M][cashflows]; detval [M][detvals]; terms: the contract's terms (contracts.py layout)
//   constants: AS241 (normal.py layout); scale = 2^-bits; paths k = first .. first + count - 1 of a job
//   of `paths` paths (batch of path k = k * 32 / paths)
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

__host__ __device__ inline float mc_exp(float x) { return expf(x); }
__host__ __device__ inline double mc_exp(double x) { return exp(x); }
__host__ __device__ inline float mc_log(float x) { return logf(x); }
__host__ __device__ inline double mc_log(double x) { return log(x); }
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

__host__ __device__ inline real ppnd16(real u, const real* c)
{
    const real q = u - c[AS_HALF];
    if ((q < 0 ? -q : q) <= c[AS_SPLIT_Q]) return q * as241_ratio(c, AS_CENTRAL, c[AS_CENTRAL_SHIFT] - q * q);
    const real r = mc_sqrt(-mc_log(q < 0 ? u : c[AS_ONE] - u));
    const real z = r <= c[AS_FAR_SPLIT] ? as241_ratio(c, AS_NEAR, r - c[AS_NEAR_SHIFT])
                                        : as241_ratio(c, AS_FAR, r - c[AS_FAR_SPLIT]);
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

// What a contract keeps while a path's dates go by, and its payoff (contracts.py, `payoff`).
struct Payoff {
    bool done;      // contract 2: called early
    bool touched;   // contract 3: a barrier was touched
    double value;

    __host__ __device__ Payoff() : done(false), touched(false), value(0.0) {}

    __host__ __device__ void observe(const McJob& job, int m, int t, const real* s)
    {
        const real* disc = job.disc + m * job.cashflows;
        const real* terms = job.terms;
        const int last = job.dates - 1;
#if MC_CONTRACT == 1
        if (t == last) {
            const real amount = (s[0] - terms[0]) * job.detval[m * job.detvals];
            value = amount > 0 ? (double)(amount * disc[0]) : 0.0;
        }
#elif MC_CONTRACT == 2
        const int U = MC_UNDERLYINGS;
        if (done) return;
        const real w = worst(s, terms);
        if (t < last) {
            if (w >= 1) {
                done = true;
                value = (double)(terms[U + t] * disc[t]);
            }
            return;
        }
        const real notional = terms[U + last + 1];
        const real amount = w >= 1 ? terms[U + last] : (w > terms[U + last + 2] ? notional : w * notional);
        value = (double)(amount * disc[last]);
#else
        const int U = MC_UNDERLYINGS;
        for (int j = 0; j < U; ++j)
            if (s[j] <= terms[U + j]) touched = true;
        if (t == last) {
            bool below = false;
            for (int j = 0; j < U; ++j)
                if (s[j] < terms[j]) below = true;
            const real notional = terms[2 * U + 1];
            const real amount = touched && below ? notional * worst(s, terms) : notional;
            value = (double)(terms[2 * U] * disc[0] + amount * disc[1]);
        }
#endif
    }
};

// The payoff of the path with Sobol index n = n0 + t under model m, where `base` holds x_{n0} (n0 a
// multiple of a power of two above t): x_n = x_{n0} XOR x_t, the low part summed from the directions.
// The bridge keeps W in MC_SLOTS registers; dates are taken in ascending order as they complete.
__host__ __device__ inline double path_payoff(const McJob& job, int m, const unsigned int* base, unsigned int t)
{
    const int U = MC_UNDERLYINGS;
    const unsigned int low = t ^ (t >> 1);
    real w[MC_SLOTS][MC_UNDERLYINGS];
    real prev[MC_UNDERLYINGS], growth[MC_UNDERLYINGS], s[MC_UNDERLYINGS], dw[MC_UNDERLYINGS];
    for (int j = 0; j < U; ++j) {
        w[0][j] = 0;
        prev[j] = 0;
        growth[j] = 1;
    }
    Payoff payoff;
    for (int i = 0; i < job.dates; ++i) {
        for (int j = 0; j < U; ++j) {
            const int d = i * U + j;
            unsigned int x = base[d];
            for (unsigned int g = low, b = 0; g; ++b, g >>= 1)
                if (g & 1) x ^= job.directions[d * job.bits + b];
            real u = (real)x;
            const real z = ppnd16(u * job.scale, job.constants);
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
                for (int l = 1; l <= j; ++l) eps += L[l] * dw[l];
                const real e = mc_exp(eps * job.vol[at + j] + job.drift[at + j]);
                growth[j] = date == 0 ? e : growth[j] * e;
                s[j] = job.spots[m * U + j] * growth[j];
            }
            payoff.observe(job, m, date, s);
        }
    }
    return payoff.value;
}

// Batch of path k (0-based) in a job of `paths` paths.
__host__ __device__ inline int batch_of(long long k, long long paths) { return (int)(k * MC_BATCHES / paths); }
