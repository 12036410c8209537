// One block per tree, for trees too wide for a flat block (kernels/flat.cu keeps four rows of a bin in
// shared memory, which caps a tree at 4096 nodes in fp64). Thread t visits nodes t, t + blockDim.x, ...
// (consecutive threads, consecutive addresses); the tree's rows live in global memory, where the L1 and
// L2 caches keep them close: per tree, rows 0-3 (Q, Q' forward; B, B', O, O' backward) and row 4 (the
// node discounts exp(-j dr dt)), each of width + 4 reals with two zero pads each side, start at
// scratch[row_base[b]]. Node weights are recomputed from the node discounts on every step.
//
// As in the flat kernel, the forward pass iterates the state prices without the alphas and turns the
// sums S~_m into exp(-alpha_m dt) afterwards (alphas_from_sums), so a step needs one barrier; the block's
// sum is reduced by shuffles within warps and by thread 0 over the warps, in a fixed order. A launch of
// followers (common.cuh's Leaders) skips the forward pass: each tree reads its leader's exp(-alpha_m dt).
#include "common.cuh"

#ifndef WIDE_THREADS
#define WIDE_THREADS 1024
#endif

extern "C" __global__ void __launch_bounds__(WIDE_THREADS)
    wide_price(PORTFOLIO_PARAMS, const long long* order, const long long* row_base, const long long* alpha_base,
               real* scratch, real* alphas, LEADER_PARAMS, double* bond_out, double* option_out)
{
    const Portfolio book PORTFOLIO_ARGS;
    const Leaders leaders LEADER_ARGS;
    const int t = threadIdx.x, threads = blockDim.x, lane = t & 31, warp = t >> 5, warps = threads >> 5;
    const long long id = order[blockIdx.x];
    const Tree tree(book, id);
    const int w = tree.width, height = tree.height;
    const int pitch = w + 4;
    real* rows = scratch + row_base[blockIdx.x];
    real* discount = rows + 4 * pitch + 2;
    real* ea = alphas + alpha_base[blockIdx.x];
    __shared__ real partial[2][32];

    for (int i = t; i < 5 * pitch; i += threads) rows[i] = real(0);
    __syncthreads();
    for (int p = t; p < w; p += threads) discount[p] = real(tree.node_discount(p));
    __syncthreads();

    // ---- forward: S~_m, then exp(-alpha_m dt) (leaders only) ----
    if (!leaders.followers) {
        real* Q = rows + 2;
        real* Q_next = Q + pitch;
        if (t == 0) {
            Q[tree.jmax] = real(1);
            ea[0] = real(1);  // S~_0
        }
        __syncthreads();
        for (int m = 0; m + 1 < height; ++m) {
            if (t == 0 && m >= 1) {  // S~_m from the warp sums of the previous step
                real sum = real(0);
                for (int v = 0; v < warps; ++v) sum += partial[(m - 1) & 1][v];
                ea[m] = sum;
            }
            real v = real(0);
            for (int p = t; p < w; p += threads) {
                const Branching below = tree.interior_weights(p - 1, discount[p - 1]);
                const Branching here = tree.interior_weights(p, discount[p]);
                const Branching above = tree.interior_weights(p + 1, discount[p + 1]);
                real q = real(below.up) * Q[p - 1] + real(here.mid) * Q[p] + real(above.down) * Q[p + 1];
                if (m == 0 && tree.phase != 0) q = real(tree.root_share(p));  // the root's first step of its own
                if (p <= 2 || p >= w - 3) {  // the edge nodes' own branching
                    if (p == 2) q += tree.bottom_up * Q[0];
                    if (p == 1) q += tree.bottom_mid * Q[0];
                    if (p == 0) q += tree.bottom_down * Q[0];
                    if (p == w - 1) q += tree.top_up * Q[w - 1];
                    if (p == w - 2) q += tree.top_mid * Q[w - 1];
                    if (p == w - 3) q += tree.top_down * Q[w - 1];
                }
                Q_next[p] = q;
                v += q * discount[p];
            }
            v = warp_sum(v);
            if (lane == 0) partial[m & 1][warp] = v;
            __syncthreads();
            swap_rows(Q, Q_next);
        }
        if (t == 0 && height >= 2) {
            real sum = real(0);
            for (int v = 0; v < warps; ++v) sum += partial[(height - 2) & 1][v];
            ea[height - 1] = sum;
        }
        __syncthreads();
        alphas_from_sums(book, order + blockIdx.x, 1, height, ea);
    }
    const real* my_ea = leaders.followers ? leaders.of(id) : ea;
    const long long ea_stride = leaders.followers ? leaders.stride[id] : 1;

    // ---- backward: bond and option from maturity to the root ----
    const bool call = book.is_call[id];
    const int last_exercise = book.option_from[id];
    EventCursor cursor;
    cursor.start(book, id);
    real* B = rows + 2;
    real* B_next = B + pitch;
    real* O = B_next + pitch;
    real* O_next = O + pitch;
    for (int i = height; i >= 0; --i) {
        const real e = i < height ? my_ea[i * ea_stride] : real(0);
        const StepEvents events = cursor.at(book, i);
        for (int p = t; p < w; p += threads) {
            real b, o = real(0);
            if (i == height) {
                b = real(0);
            } else {
                // sources p-1 .. p+1 inside, p-2 .. p at the top, p .. p+2 at the bottom
                real c0, c1, c2;
                int from;
                if (p == w - 1) {
                    c0 = tree.top_down; c1 = tree.top_mid; c2 = tree.top_up; from = p - 2;
                } else if (p == 0) {
                    c0 = tree.bottom_down; c1 = tree.bottom_mid; c2 = tree.bottom_up; from = 0;
                } else {
                    const Branching weight = tree.interior_weights(p, discount[p]);
                    c0 = real(weight.down); c1 = real(weight.mid); c2 = real(weight.up); from = p - 1;
                }
                b = e * (c0 * B[from] + c1 * B[from + 1] + c2 * B[from + 2]);
                if (i < last_exercise) o = e * (c0 * O[from] + c1 * O[from + 1] + c2 * O[from + 2]);
                if (i == 0 && tree.phase != 0 && p == tree.jmax) {  // the root's first step of its own
                    b = tree.root_value(e, B, 1);
                    o = i < last_exercise ? tree.root_value(e, O, 1) : real(0);
                }
            }
            apply_events(book, events, call, b, o);
            B_next[p] = b;
            O_next[p] = o;
            if (i == 0 && p == tree.jmax) {
                bond_out[id] = double(b);
                option_out[id] = double(o);
            }
        }
        __syncthreads();
        swap_rows(B, B_next);
        swap_rows(O, O_next);
    }
}
