// A curve bump as the risk kernels apply it (distprice/lattice/sweeps.py): the zero curve z(t) becomes
// z(t) + dz(t), dz given at `knots` grid times (years), linear between them and flat outside. The tree is not
// refitted: its exp(-alpha_i dt) is multiplied by r(t_{i+1}) / r(t_i) and an event's amount (due at t, applied
// at step time tau) by r(t) / r(tau), with r(t) = exp(-dz(t) t) = P'(0, t) / P(0, t). Host-compilable, like
// curve.cuh, so that the tests hold it against the CPU engine.
#pragma once

#include "curve.cuh"

// dz(t) * t.
HOST_DEVICE double bump_exponent(double t, const double* grid, const double* dz, int knots)
{
    if (t <= grid[0]) return dz[0] * t;
    if (t >= grid[knots - 1]) return dz[knots - 1] * t;
    int j = 0;
    while (grid[j + 1] < t) ++j;
    return (dz[j] + (dz[j + 1] - dz[j]) * (t - grid[j]) / (grid[j + 1] - grid[j])) * t;
}

// r(t_{i+1}) / r(t_i): the factor of exp(-alpha_i dt) under the bump.
HOST_DEVICE double bump_rate_factor(double t_here, double t_above, const double* grid, const double* dz, int knots)
{
    return exp(bump_exponent(t_here, grid, dz, knots) - bump_exponent(t_above, grid, dz, knots));
}

// r(t) / r(tau): the factor of an event's amount under the bump (exactly 1 for an event on the grid).
HOST_DEVICE double bump_event_factor(double t, double tau, const double* grid, const double* dz, int knots)
{
    if (t == tau) return 1.0;
    return exp(bump_exponent(tau, grid, dz, knots) - bump_exponent(t, grid, dz, knots));
}
