// Shared pieces of the GPU kernels: the precision, the Hull-White tree's branching weights, the zero
// curve and the event cursors. Compiled with -DREAL=double (fp64) or -DREAL=float (fp32); tree
// parameters (dt, dr, M) and the curve stay double, node arithmetic is in `real`.
//
// Node indices: an instrument of half-width jmax has w = 2 jmax + 1 nodes p = 0 .. w-1, j = p - jmax.
// Every kernel covers the full rectangle of w nodes on every step (SPEC §6); nodes not yet reachable
// hold exact zeros in the forward pass and never feed reachable nodes in the backward pass.
#pragma once

#ifndef REAL
#define REAL double
#endif
typedef REAL real;

// Branching probabilities (SPEC §2) of node j: `up`, `mid`, `down` go to j+1, j, j-1 for an interior
// node, to j, j-1, j-2 at the top edge (j = jmax) and to j+2, j+1, j at the bottom edge (j = -jmax).
struct Branching {
    double up, mid, down;
};

__device__ __forceinline__ Branching interior_branching(double x)
{
    return {1.0 / 6.0 + (x * x + x) / 2.0, 2.0 / 3.0 - x * x, 1.0 / 6.0 + (x * x - x) / 2.0};
}

__device__ __forceinline__ Branching top_branching(double x)
{
    return {7.0 / 6.0 + (x * x + 3.0 * x) / 2.0, -1.0 / 3.0 - x * x - 2.0 * x, 1.0 / 6.0 + (x * x + x) / 2.0};
}

__device__ __forceinline__ Branching bottom_branching(double x)
{
    return {1.0 / 6.0 + (x * x - x) / 2.0, -1.0 / 3.0 - x * x + 2.0 * x, 7.0 / 6.0 + (x * x - 3.0 * x) / 2.0};
}

// z(t) on a zero curve linear in t with flat ends, given k = the first knot with knot_t[k] >= t.
__device__ __forceinline__ double zero_rate_below_knot(double t, const double* knot_t, const double* knot_z,
                                                       int knots, int k)
{
    if (k == 0) return knot_z[0];
    if (k == knots) return knot_z[knots - 1];
    const double t0 = knot_t[k - 1], z0 = knot_z[k - 1];
    return z0 + (knot_z[k] - z0) * (t - t0) / (knot_t[k] - t0);
}

// P(0, t); `hint` is a knot index that only moves forward, so a caller walking t upwards pays O(1) per call.
__device__ __forceinline__ double discount_bond(double t, const double* knot_t, const double* knot_z,
                                                int knots, int& hint)
{
    while (hint < knots && knot_t[hint] < t) ++hint;
    return exp(-zero_rate_below_knot(t, knot_t, knot_z, knots, hint) * t);
}

// P(0, t) for any t (binary search for the knot).
__device__ __forceinline__ double discount_bond(double t, const double* knot_t, const double* knot_z, int knots)
{
    int lo = 0, hi = knots;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (knot_t[mid] < t) lo = mid + 1; else hi = mid;
    }
    return exp(-zero_rate_below_knot(t, knot_t, knot_z, knots, lo) * t);
}

// The arrays every kernel reads, in the caller's (unsorted) row order. Events are CSR tables with steps
// in decreasing order; `option_from` is the last exercise step (the option is zero above it).
struct Portfolio {
    const int* jmax;
    const int* height;
    const double* dt;
    const double* dr;
    const double* M;
    const real* face;
    const unsigned char* is_call;
    const int* curve;
    const long long* curve_offsets;
    const double* curve_t;
    const double* curve_z;
    const long long* coupon_offsets;
    const int* coupon_step;
    const real* coupon_amount;
    const long long* exercise_offsets;
    const int* exercise_step;
    const real* exercise_strike;
    const int* option_from;
};

// Kernel parameters that make up a Portfolio, and the braced list that builds it from them.
#define PORTFOLIO_PARAMS                                                                                   \
    const int *in_jmax, const int *in_height, const double *in_dt, const double *in_dr, const double *in_M,              \
        const real *in_face, const unsigned char *in_is_call, const int *in_curve, const long long *in_curve_offsets, \
        const double *in_curve_t, const double *in_curve_z, const long long *in_coupon_offsets,                    \
        const int *in_coupon_step, const real *in_coupon_amount, const long long *in_exercise_offsets,             \
        const int *in_exercise_step, const real *in_exercise_strike, const int *in_option_from
#define PORTFOLIO_ARGS                                                                                    \
    {in_jmax, in_height, in_dt, in_dr, in_M, in_face, in_is_call, in_curve, in_curve_offsets, in_curve_t, in_curve_z, in_coupon_offsets,      \
     in_coupon_step, in_coupon_amount, in_exercise_offsets, in_exercise_step, in_exercise_strike, in_option_from}

// One instrument's tree: its shape, its zero curve and the weights of its two edge nodes, which are the
// edge branching probabilities times the edge node's own discount exp(-j dr dt).
struct Tree {
    int jmax, width, height;
    double dt, M, drdt;
    const double *knot_t, *knot_z;
    int knots;
    real top_up, top_mid, top_down, bottom_up, bottom_mid, bottom_down;

    __device__ Tree(const Portfolio& book, long long row)
    {
        jmax = book.jmax[row];
        width = 2 * jmax + 1;
        height = book.height[row];
        dt = book.dt[row];
        M = book.M[row];
        drdt = book.dr[row] * dt;
        const int c = book.curve[row];
        knot_t = book.curve_t + book.curve_offsets[c];
        knot_z = book.curve_z + book.curve_offsets[c];
        knots = int(book.curve_offsets[c + 1] - book.curve_offsets[c]);
        const double e_top = exp(-jmax * drdt), e_bottom = exp(jmax * drdt);
        const Branching top = top_branching(jmax * M), bottom = bottom_branching(-jmax * M);
        top_up = real(top.up * e_top);
        top_mid = real(top.mid * e_top);
        top_down = real(top.down * e_top);
        bottom_up = real(bottom.up * e_bottom);
        bottom_mid = real(bottom.mid * e_bottom);
        bottom_down = real(bottom.down * e_bottom);
    }

    // exp(-j dr dt) of node p.
    __device__ __forceinline__ double node_discount(int p) const { return exp(-(p - jmax) * drdt); }

    // Interior branching probabilities of node p times its discount; zero for the edge nodes, whose own
    // branching the caller adds with the edge weights.
    __device__ __forceinline__ Branching interior_weights(int p, double node_discount) const
    {
        if (p <= 0 || p >= width - 1) return {0.0, 0.0, 0.0};
        const Branching b = interior_branching((p - jmax) * M);
        return {b.up * node_discount, b.mid * node_discount, b.down * node_discount};
    }
};

// Walks one instrument's coupon and exercise events from maturity down to the root. The events of one
// step collapse to one strike (the lowest for a call, the highest for a put: max over strikes of the
// payoff is the payoff of that strike) and one coupon sum.
struct EventCursor {
    int coupon, coupon_end, exercise, exercise_end;  // chunks hold fewer than 2^31 events (the launcher checks)

    __device__ void start(const Portfolio& book, long long row)
    {
        coupon = int(book.coupon_offsets[row]);
        coupon_end = int(book.coupon_offsets[row + 1]);
        exercise = int(book.exercise_offsets[row]);
        exercise_end = int(book.exercise_offsets[row + 1]);
    }

    // Events of step i: returns whether the option may be exercised there (and its strike in `strike`);
    // `coupon_sum` receives the coupons paid at step i (0 if none).
    __device__ __forceinline__ bool at(const Portfolio& book, int i, bool call, real& strike, real& coupon_sum)
    {
        bool exercised = false;
        while (exercise < exercise_end && book.exercise_step[exercise] == i) {
            const real k = book.exercise_strike[exercise++];
            strike = !exercised ? k : (call ? fmin(strike, k) : fmax(strike, k));
            exercised = true;
        }
        coupon_sum = real(0);
        while (coupon < coupon_end && book.coupon_step[coupon] == i) coupon_sum += book.coupon_amount[coupon++];
        return exercised;
    }
};

// Exchanges two row pointers: double-buffered rows swap roles after each step.
__device__ __forceinline__ void swap_rows(real*& a, real*& b)
{
    real* t = a;
    a = b;
    b = t;
}

__device__ __forceinline__ real payoff(real bond, real strike, bool call)
{
    return call ? fmax(bond - strike, real(0)) : fmax(strike - bond, real(0));
}

// Exercise then coupon at one node (SPEC §2: exercise sees the ex-coupon bond value).
__device__ __forceinline__ void apply_events(real& bond, real& option, bool exercised, real strike, real coupon_sum,
                                             bool call)
{
    if (exercised) option = fmax(option, payoff(bond, strike, call));
    bond += coupon_sum;
}

// Turns the sums S~_m = sum_j Q~(m, j) exp(-j dr dt) of state prices iterated without the alphas into
// e_m = exp(-alpha_m dt) = P(m+1) S~_{m-1} / (P(m) S~_m), S~_{-1} = P(0) = 1, in place in
// ea[m * count + k] for the `count` instruments of the block (batch rows rows[k]) and m < their height.
// (With Q(m) = c_m Q~(m), c_m = e_0 ... e_{m-1}, the fit e_m = P(m+1) / S_m gives c_m = P(m) / S~_{m-1}.)
// Every thread of the block calls it after a barrier that follows the last write of a sum. Thread t takes
// instrument t % count and one chunk of its steps, downwards, so the S~_{m-1} it reads is not yet
// overwritten; the one below its chunk is read before a barrier. Needs count <= blockDim.x.
__device__ void alphas_from_sums(const Portfolio& book, const long long* rows, int count, int steps, real* ea)
{
    const int t = threadIdx.x, chunks = blockDim.x / count, chunk = t / count, mine = t % count;
    const int length = (steps + chunks - 1) / chunks, low = chunk * length;
    const long long row = rows[mine];
    const int high = chunk < chunks ? min(low + length, book.height[row]) : 0;
    const real below_chunk = low >= 1 && low < high ? ea[(long long)(low - 1) * count + mine] : real(1);
    __syncthreads();
    if (low < high) {
        const Tree tree(book, row);
        double P_above = discount_bond(high * tree.dt, tree.knot_t, tree.knot_z, tree.knots);
        for (int m = high - 1; m >= low; --m) {
            const double P_here = discount_bond(m * tree.dt, tree.knot_t, tree.knot_z, tree.knots);
            const double S = ea[(long long)m * count + mine];
            const double S_before = m > low ? double(ea[(long long)(m - 1) * count + mine]) : double(below_chunk);
            ea[(long long)m * count + mine] = real(P_above * S_before / (P_here * S));
            P_above = P_here;
        }
    }
    __syncthreads();
}
