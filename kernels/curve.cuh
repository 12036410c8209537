// The zero curve every kernel reads: knots (t years, z continuously compounded), z linear in t between knots
// and flat outside, P(0, t) = exp(-z(t) t). Host-compilable (a C++ compiler without CUDA builds these
// functions too, so that the tests check them on any machine).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HOST_DEVICE __host__ __device__ __forceinline__
#else
#include <cmath>
#define HOST_DEVICE inline
using std::exp;
using std::fmax;
#endif

// z(t) given k = the first knot with knot_t[k] >= t.
HOST_DEVICE double zero_rate_below_knot(double t, const double* knot_t, const double* knot_z, int knots, int k)
{
    if (k == 0) return knot_z[0];
    if (k == knots) return knot_z[knots - 1];
    const double t0 = knot_t[k - 1], z0 = knot_z[k - 1];
    return z0 + (knot_z[k] - z0) * (t - t0) / (knot_t[k] - t0);
}

// P(0, t); `hint` is a knot index that only moves forward, so a caller walking t upwards pays O(1) per call.
HOST_DEVICE double discount_bond(double t, const double* knot_t, const double* knot_z, int knots, int& hint)
{
    while (hint < knots && knot_t[hint] < t) ++hint;
    return exp(-zero_rate_below_knot(t, knot_t, knot_z, knots, hint) * t);
}

// P(0, t) for any t (binary search for the knot).
HOST_DEVICE double discount_bond(double t, const double* knot_t, const double* knot_z, int knots)
{
    int lo = 0, hi = knots;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (knot_t[mid] < t) lo = mid + 1; else hi = mid;
    }
    return exp(-zero_rate_below_knot(t, knot_t, knot_z, knots, lo) * t);
}
