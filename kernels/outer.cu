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
// A launch of followers (common.cuh's Leaders) runs no forward pass: each tree reads its leader's values,
// written there by a launch of leaders.
#include "outer.cuh"

#ifndef OUTER_THREADS
#define OUTER_THREADS 128
#endif
#ifndef OUTER_MIN_BLOCKS
#define OUTER_MIN_BLOCKS 1
#endif

extern "C" __global__ void __launch_bounds__(OUTER_THREADS, OUTER_MIN_BLOCKS)
    outer_price(PORTFOLIO_PARAMS, int n, const long long* order, int lanes, const long long* row_base,
                const int* pitch, const long long* alpha_base, real* rows, real* alphas, LEADER_PARAMS,
                double* bond_out, double* option_out)
{
    const Portfolio book PORTFOLIO_ARGS;
    const Leaders leaders LEADER_ARGS;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const long long row = order[k];
    const int group = k / lanes, lane = k - group * lanes;
    const long long stride = lanes;
    real* bond = rows + row_base[group] + lane;
    real* option = bond + pitch[group] * stride;
    const Tree tree(book, row);
    if (leaders.followers) {
        backward(book, tree, row, bond, option, stride, leaders.of(row), leaders.stride[row], bond_out[row],
                 option_out[row]);
    } else {
        real* ea = alphas + alpha_base[group] + lane;
        forward(tree, bond, ea, stride);
        backward(book, tree, row, bond, option, stride, ea, stride, bond_out[row], option_out[row]);
    }
}
