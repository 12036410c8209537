// GPU-OUTER: one instrument per thread (Pawlak et al., ARRAY'21 §4).
//
// Each thread keeps its instrument's rows in global memory: row 0 holds the state prices Q in the forward
// pass and the bond values in the backward pass, row 1 the option values. Rows are updated in place with
// a sliding window of three nodes in registers, so each node costs one load and one store per row and
// step. The node weights (branching probability times exp(-j dr dt)) are computed on the fly; the node
// discount is strength-reduced to one multiplication per node, refreshed by an exp every 32 nodes.
//
// Layout: instruments are grouped `lanes` at a time (32 = one warp, the papers' V4; the whole portfolio,
// V2; 1, no interleaving, V1). A group's arrays are padded to its widest and tallest member and
// transposed, so that node p of row r of the instrument in lane l sits at
//     rows[row_base[g] + (r * pitch[g] + p) * lanes + l]
// and consecutive threads touch consecutive addresses. exp(-alpha_m dt) of step m sits at
//     alphas[alpha_base[g] + m * lanes + l].
#include "outer.cuh"

#ifndef OUTER_THREADS
#define OUTER_THREADS 128
#endif
#ifndef OUTER_MIN_BLOCKS
#define OUTER_MIN_BLOCKS 1
#endif

extern "C" __global__ void __launch_bounds__(OUTER_THREADS, OUTER_MIN_BLOCKS) outer_price(PORTFOLIO_PARAMS, int n, const long long* order, int lanes,
                                       const long long* row_base, const int* pitch, const long long* alpha_base,
                                       real* rows, real* alphas, double* bond_out, double* option_out)
{
    const Portfolio book PORTFOLIO_ARGS;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const long long row = order[k];
    const int group = k / lanes, lane = k - group * lanes;
    const long long stride = lanes;
    real* bond = rows + row_base[group] + lane;
    real* option = bond + pitch[group] * stride;
    real* ea = alphas + alpha_base[group] + lane;
    const Tree tree(book, row);
    forward(tree, bond, ea, stride);

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
    for (int i = tree.height - 1; i >= 0; --i) {
        const real e = ea[i * stride];
        const StepEvents events = cursor.at(book, i);
        if (i < last_exercise)
            roll_back<true>(book, tree, e, bond, option, stride, events, call);
        else
            roll_back<false>(book, tree, e, bond, option, stride, events, call);
    }
    bond_out[row] = double(bond[tree.jmax * stride]);
    option_out[row] = double(option[tree.jmax * stride]);
}
