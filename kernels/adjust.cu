// The forward adjustment of every event of a batch under one curve set (a market scenario, or the base
// curves): amount[e] = raw[e] * P(0, time[e]) / P(0, tau), tau the time of step[e] (step_time, its row's dt and
// phase), in the pricing precision. One thread
// per row, which walks its events; the pricing kernels then read `amount`. Rerun for each curve set: the
// event times and raw amounts are uploaded once.
#include "common.cuh"

extern "C" __global__ void adjust_amounts(int rows, const long long* offsets, const int* step, const double* time,
                                          const double* raw, const double* dt, const int* phase, const int* curve,
                                          const long long* curve_offsets, const double* curve_t,
                                          const double* curve_z, real* amount)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const int c = curve[row];
    const double* knot_t = curve_t + curve_offsets[c];
    const double* knot_z = curve_z + curve_offsets[c];
    const int knots = int(curve_offsets[c + 1] - curve_offsets[c]);
    for (long long e = offsets[row]; e < offsets[row + 1]; ++e)
        amount[e] = real(raw[e] * forward_adjustment(time[e], step_time(step[e], dt[row], phase[row]), knot_t, knot_z, knots));
}
