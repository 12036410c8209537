// Shared pieces of the GPU kernels: the precision, the Hull-White tree's branching weights, the arrays every
// kernel reads, the event cursor and where a follower finds its leader's forward pass (the zero curve is in
// curve.cuh, the events' arithmetic in events.cuh). Compiled with -DREAL=double (fp64) or -DREAL=float
// (fp32); tree parameters (dt, dr, M) and the curve stay double, node arithmetic is in `real`. All but
// alphas_from_sums are host-compilable too (HOST_DEVICE, curve.cuh), so that the tests build one tree's
// arithmetic on any machine.
//
// Node indices: an instrument of half-width jmax has w = 2 jmax + 1 nodes p = 0 .. w-1, j = p - jmax.
// Every kernel covers the full rectangle of w nodes on every step (node-steps counted as 2 w h, w h for a
// follower, which runs no forward pass); nodes not yet reachable hold exact zeros in the forward pass and
// never feed reachable nodes in the backward pass.
#pragma once

#include "events.cuh"

#ifndef REAL
#define REAL double
#endif
typedef REAL real;

// Branching probabilities (Hull and White) of node j: `up`, `mid`, `down` go to j+1, j, j-1 for an interior
// node, to j, j-1, j-2 at the top edge (j = jmax) and to j+2, j+1, j at the bottom edge (j = -jmax).
struct Branching {
    double up, mid, down;
};

HOST_DEVICE Branching interior_branching(double x)
{
    return {1.0 / 6.0 + (x * x + x) / 2.0, 2.0 / 3.0 - x * x, 1.0 / 6.0 + (x * x - x) / 2.0};
}

HOST_DEVICE Branching top_branching(double x)
{
    return {7.0 / 6.0 + (x * x + 3.0 * x) / 2.0, -1.0 / 3.0 - x * x - 2.0 * x, 1.0 / 6.0 + (x * x + x) / 2.0};
}

HOST_DEVICE Branching bottom_branching(double x)
{
    return {1.0 / 6.0 + (x * x - x) / 2.0, -1.0 / 3.0 - x * x + 2.0 * x, 7.0 / 6.0 + (x * x - 3.0 * x) / 2.0};
}

// The arrays every kernel reads, in the caller's (unsorted) row order (the launcher's KERNEL_ARGS). Events
// are one CSR table per batch, in the order they are applied (events.cuh), their amounts forward-adjusted by
// adjust.cu; `option_from` is the last exercise step (the option is zero above it).
struct Portfolio {
    const int* jmax;
    const int* height;
    const double* dt;
    const double* dr;
    const double* M;
    const int* phase;
    const double* root;
    const unsigned char* is_call;
    const int* curve;
    const long long* curve_offsets;
    const double* curve_t;
    const double* curve_z;
    const long long* event_offsets;
    const int* event_step;
    const unsigned char* event_kind;
    const real* event_amount;
    const int* option_from;
};

// Kernel parameters that make up a Portfolio, and the braced list that builds it from them.
#define PORTFOLIO_PARAMS                                                                                          \
    const int *in_jmax, const int *in_height, const double *in_dt, const double *in_dr, const double *in_M,     \
        const int *in_phase, const double *in_root, const unsigned char *in_is_call, const int *in_curve, const long long *in_curve_offsets,                 \
        const double *in_curve_t, const double *in_curve_z, const long long *in_event_offsets,                   \
        const int *in_event_step, const unsigned char *in_event_kind, const real *in_event_amount,               \
        const int *in_option_from
#define PORTFOLIO_ARGS                                                                                           \
    {in_jmax, in_height, in_dt, in_dr, in_M, in_phase, in_root, in_is_call, in_curve, in_curve_offsets, in_curve_t, in_curve_z,   \
     in_event_offsets, in_event_step, in_event_kind, in_event_amount, in_option_from}

// One instrument's tree: its shape, its zero curve and the weights of its two edge nodes, which are the
// edge branching probabilities times the edge node's own discount exp(-j dr dt). A tree of a phase (a dated row's,
// distprice/lattice/geometry.py) has its steps s >= 1 at time(s) and a first step of its own length, whose
// root branches root / 6, 1 - root / 3, root / 6 (root_share, root_value).
struct Tree {
    int jmax, width, height, phase;
    double dt, M, drdt, root;
    const double *knot_t, *knot_z;
    int knots;
    real top_up, top_mid, top_down, bottom_up, bottom_mid, bottom_down;

    HOST_DEVICE Tree(const Portfolio& book, long long row) : Tree(book, row, book.dr[row]) {}

    // The row's tree with another rate step dr (another volatility: the risk kernels' vega trees).
    HOST_DEVICE Tree(const Portfolio& book, long long row, double dr)
    {
        jmax = book.jmax[row];
        width = 2 * jmax + 1;
        height = book.height[row];
        dt = book.dt[row];
        M = book.M[row];
        phase = book.phase[row];
        root = book.root[row];
        drdt = dr * dt;
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
    HOST_DEVICE double node_discount(int p) const { return exp(-(p - jmax) * drdt); }

    // The time of step s (years).
    HOST_DEVICE double time(int s) const { return step_time(s, dt, phase); }

    // On a tree of a phase, what the root sends node p on its first step (its state price there, undiscounted).
    HOST_DEVICE double root_share(int p) const
    {
        return p == jmax ? 1.0 - root / 3.0 : (p == jmax - 1 || p == jmax + 1) ? root / 6.0 : 0.0;
    }

    // On a tree of a phase, the root's value from the values V of step 1 (nodes `stride` apart) and the first
    // step's e = exp(-alpha_0 h).
    HOST_DEVICE real root_value(real e, const real* V, long long stride) const
    {
        const long long c = jmax * stride;
        return e * (real(root / 6.0) * V[c - stride] + real(1.0 - root / 3.0) * V[c] + real(root / 6.0) * V[c + stride]);
    }

    // Interior branching probabilities of node p times its discount; zero for the edge nodes, whose own
    // branching the caller adds with the edge weights.
    HOST_DEVICE Branching interior_weights(int p, double node_discount) const
    {
        if (p <= 0 || p >= width - 1) return {0.0, 0.0, 0.0};
        const Branching b = interior_branching((p - jmax) * M);
        return {b.up * node_discount, b.mid * node_discount, b.down * node_discount};
    }
};

// The events of one step: indices [first, last) of the event table, and whether one of them is an exercise.
struct StepEvents {
    int first, last;
    bool exercise;
};

// Walks one instrument's events from its last step down to the root.
struct EventCursor {
    int next, end;  // batches hold fewer than 2^31 events (the launcher checks)

    HOST_DEVICE void start(const Portfolio& book, long long row)
    {
        next = int(book.event_offsets[row]);
        end = int(book.event_offsets[row + 1]);
    }

    HOST_DEVICE StepEvents at(const Portfolio& book, int i)
    {
        StepEvents events{next, next, false};
        while (next < end && book.event_step[next] == i) events.exercise |= is_exercise(book.event_kind[next++]);
        events.last = next;
        return events;
    }
};

// The events of a step, in order, at one node.
HOST_DEVICE void apply_events(const Portfolio& book, const StepEvents& events, bool call, real& bond, real& option)
{
    for (int e = events.first; e < events.last; ++e)
        apply_event(book.event_kind[e], book.event_amount[e], call, bond, option);
}

// Where the trees of a launch find exp(-alpha_m dt). A launch of leaders (`followers` 0) runs every tree's own
// forward pass. In a launch of followers (`followers` 1) no tree runs one: the tree of batch row r reads the
// values its group's leader computed in an earlier launch (distprice/lattice/groups.py), at
// alphas[at[r] + m * stride[r]], for every step m of its own (a group's leader is its tallest tree).
struct Leaders {
    bool followers;
    const long long* at;
    const int* stride;
    const real* alphas;

    HOST_DEVICE const real* of(long long row) const { return alphas + at[row]; }
};

// Kernel parameters that make up Leaders, and the braced list that builds it from them.
#define LEADER_PARAMS int in_followers, const long long *in_leader_at, const int *in_leader_stride, \
    const real *in_leader_alphas
#define LEADER_ARGS {in_followers != 0, in_leader_at, in_leader_stride, in_leader_alphas}

// Exchanges two row pointers: double-buffered rows swap roles after each step.
HOST_DEVICE void swap_rows(real*& a, real*& b)
{
    real* t = a;
    a = b;
    b = t;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// The sum of v over the 32 threads of a warp, in a fixed order, in lane 0.
__device__ __forceinline__ real warp_sum(real v)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    return v;
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
        double P_above = discount_bond(tree.time(high), tree.knot_t, tree.knot_z, tree.knots);
        for (int m = high - 1; m >= low; --m) {
            const double P_here = discount_bond(tree.time(m), tree.knot_t, tree.knot_z, tree.knots);
            const double S = ea[(long long)m * count + mine];
            const double S_before = m > low ? double(ea[(long long)(m - 1) * count + mine]) : double(below_chunk);
            ea[(long long)m * count + mine] = real(P_above * S_before / (P_here * S));
            P_above = P_here;
        }
    }
    __syncthreads();
}
#endif
