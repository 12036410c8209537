// One instrument per thread, its rows in global memory with a stride between nodes: the forward pass, one
// backward step and the backward pass of kernels/outer.cu (see there for the layout), shared with
// kernels/risk.cu. Host-compilable, like common.cuh (the tests run one tree through them on the host).
#pragma once

#include "common.cuh"

// Nodes loaded ahead of use: a thread's loads are independent of its stores to other nodes, so issuing
// several before the stores keeps several memory requests in flight per thread.
#ifndef OUTER_AHEAD
#define OUTER_AHEAD 4
#endif

// exp(-j dr dt) and interior weights of nodes p = 0, 1, 2, ... in turn.
struct NodeWalk {
    const Tree& tree;
    double ratio, discount;
    int p;

    HOST_DEVICE NodeWalk(const Tree& t) : tree(t), ratio(exp(-t.drdt)), discount(0.0), p(-1) {}

    HOST_DEVICE Branching next()
    {
        ++p;
        discount = (p & 31) == 0 ? tree.node_discount(p) : discount * ratio;
        return tree.interior_weights(p, discount);
    }
};

// Inflow of node p from the edge nodes, whose outflows (edge weight x e x Q) are given per target.
HOST_DEVICE real edge_inflow(const Tree& tree, int p, real top_flow, real bottom_flow)
{
    const int w = tree.width;
    real inflow = real(0);
    if (p >= w - 3) inflow += top_flow * (p == w - 1 ? tree.top_up : p == w - 2 ? tree.top_mid : tree.top_down);
    if (p <= 2) inflow += bottom_flow * (p == 2 ? tree.bottom_up : p == 1 ? tree.bottom_mid : tree.bottom_down);
    return inflow;
}

// Forward pass: fills ea[m * stride] = exp(-alpha_m dt) for m < height, using `Q` as scratch; with `saved`,
// copies the state prices Q(save_at, .) there (same stride).
HOST_DEVICE void forward(const Tree& tree, real* Q, real* ea, long long stride, int save_at = -1,
                         real* saved = nullptr)
{
    const int w = tree.width;
    for (int p = 0; p < w; ++p) Q[p * stride] = p == tree.jmax ? real(1) : real(0);
    real s = real(1);  // sum_j Q(m, j) exp(-j dr dt)
    int hint = 0;
    for (int m = 0;; ++m) {
        if (m == save_at && saved != nullptr)
            for (int p = 0; p < w; ++p) saved[p * stride] = Q[p * stride];
        const real e = real(discount_bond(tree.time(m + 1), tree.knot_t, tree.knot_z, tree.knots, hint) / s);
        ea[m * stride] = e;
        if (m == tree.height - 1) break;
        // Q(m+1, p) = e (fu(p-1) Q(p-1) + fm(p) Q(p) + fd(p+1) Q(p+1)) + edge inflows, in place.
        const real top_flow = e * Q[(w - 1) * stride], bottom_flow = e * Q[0];
        NodeWalk walk(tree);
        Branching here = walk.next();
        real discount_here = real(walk.discount);
        real up_before = real(0), q_before = real(0), q_here = Q[0];
        s = real(0);
        for (int p0 = 0; p0 < w; p0 += OUTER_AHEAD) {
            real ahead[OUTER_AHEAD];
#pragma unroll
            for (int u = 0; u < OUTER_AHEAD; ++u) ahead[u] = p0 + u + 1 < w ? Q[(p0 + u + 1) * stride] : real(0);
#pragma unroll
            for (int u = 0; u < OUTER_AHEAD; ++u) {
                const int p = p0 + u;
                if (p >= w) break;
                const real q_after = ahead[u];
                const Branching after = walk.next();
                const real q = e * (up_before * q_before + real(here.mid) * q_here + real(after.down) * q_after) +
                               edge_inflow(tree, p, top_flow, bottom_flow);
                Q[p * stride] = q;
                s += q * discount_here;
                up_before = real(here.up);
                here = after;
                discount_here = real(walk.discount);
                q_before = q_here;
                q_here = q_after;
            }
        }
        if (m == 0 && tree.phase != 0) {  // a tree of a phase: the root's first step of its own
            s = real(0);
            for (int p = tree.jmax - 1; p <= tree.jmax + 1; ++p) {
                Q[p * stride] = e * real(tree.root_share(p));
                s += Q[p * stride] * real(tree.node_discount(p));
            }
        }
    }
}

// One backward step, in place on the bond row B and (when `with_option`) the option row O: each node is
// rolled back, then the step's events are applied to it in registers, in order. Above the last exercise
// step the option is zero and its row is left alone.
template <bool with_option>
HOST_DEVICE void roll_back(const Portfolio& book, const Tree& tree, real e, real* B, real* O,
                                          long long stride, const StepEvents& events, bool call)
{
    const int w = tree.width;
    // The edge nodes read three nodes each; take them before the interior overwrites them.
    const long long top = (w - 1) * stride;
    real b_top = e * (tree.top_up * B[top] + tree.top_mid * B[top - stride] + tree.top_down * B[top - 2 * stride]);
    real b_bottom = e * (tree.bottom_up * B[2 * stride] + tree.bottom_mid * B[stride] + tree.bottom_down * B[0]);
    real o_top = real(0), o_bottom = real(0);
    if (with_option) {
        o_top = e * (tree.top_up * O[top] + tree.top_mid * O[top - stride] + tree.top_down * O[top - 2 * stride]);
        o_bottom = e * (tree.bottom_up * O[2 * stride] + tree.bottom_mid * O[stride] + tree.bottom_down * O[0]);
    }
    NodeWalk walk(tree);
    walk.next();
    real b_before = B[0], b_here = B[stride], o_before = real(0), o_here = real(0);
    if (with_option) {
        o_before = O[0];
        o_here = O[stride];
    }
    for (int p0 = 1; p0 < w - 1; p0 += OUTER_AHEAD) {
        real b_ahead[OUTER_AHEAD], o_ahead[OUTER_AHEAD];
#pragma unroll
        for (int u = 0; u < OUTER_AHEAD; ++u) {
            const bool inside = p0 + u + 1 < w;
            b_ahead[u] = inside ? B[(p0 + u + 1) * stride] : real(0);
            if (with_option) o_ahead[u] = inside ? O[(p0 + u + 1) * stride] : real(0);
        }
#pragma unroll
        for (int u = 0; u < OUTER_AHEAD; ++u) {
            const int p = p0 + u;
            if (p >= w - 1) break;
            const Branching weight = walk.next();
            const real up = real(weight.up), mid = real(weight.mid), down = real(weight.down);
            real b = e * (up * b_ahead[u] + mid * b_here + down * b_before), o = real(0);
            b_before = b_here;
            b_here = b_ahead[u];
            if (with_option) {
                o = e * (up * o_ahead[u] + mid * o_here + down * o_before);
                o_before = o_here;
                o_here = o_ahead[u];
            }
            apply_events(book, events, call, b, o);
            B[p * stride] = b;
            if (with_option || events.exercise) O[p * stride] = o;
        }
    }
    apply_events(book, events, call, b_bottom, o_bottom);
    apply_events(book, events, call, b_top, o_top);
    B[0] = b_bottom;
    B[top] = b_top;
    if (with_option || events.exercise) {
        O[0] = o_bottom;
        O[top] = o_top;
    }
}

// The backward pass of the tree of batch row `row` on its rows `bond` and `option` (nodes `stride` apart),
// with exp(-alpha_m dt) at ea[m * ea_stride]: from the events of its last step down to the root, where it
// leaves the bond's and the option's values.
HOST_DEVICE void backward(const Portfolio& book, const Tree& tree, long long row, real* bond, real* option,
                          long long stride, const real* ea, long long ea_stride, double& bond_root,
                          double& option_root)
{
    const bool call = book.is_call[row];
    const int last_exercise = book.option_from[row];
    EventCursor cursor;
    cursor.start(book, row);
    const StepEvents last = cursor.at(book, tree.height);
    for (int p = 0; p < tree.width; ++p) {
        real b = real(0), o = real(0);
        apply_events(book, last, call, b, o);
        bond[p * stride] = b;
        option[p * stride] = o;
    }
    const int last_rolled = tree.phase != 0 ? 1 : 0;  // a tree of a phase: its root's step apart
    for (int i = tree.height - 1; i >= last_rolled; --i) {
        const real e = ea[i * ea_stride];
        const StepEvents events = cursor.at(book, i);
        if (i < last_exercise)
            roll_back<true>(book, tree, e, bond, option, stride, events, call);
        else
            roll_back<false>(book, tree, e, bond, option, stride, events, call);
    }
    if (last_rolled) {  // no event lies at the root
        bond_root = double(tree.root_value(ea[0], bond, stride));
        option_root = double(tree.root_value(ea[0], option, stride));
        return;
    }
    bond_root = double(bond[tree.jmax * stride]);
    option_root = double(option[tree.jmax * stride]);
}
