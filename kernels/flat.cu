// GPU-FLAT: instruments bin-packed into CUDA blocks, both levels of parallelism flattened (Pawlak et al.,
// ARRAY'21 §5): thread t of a block is node t of the bin's concatenated rows, i.e. node p of the
// instrument whose nodes [offset, offset + width) hold t.
//
// Rows live in shared memory: four rows of blockDim.x + 4 reals (two zero pads each side), used as Q, Q'
// in the forward pass and as B, B', O, O' in the backward pass. A node's weights stay in registers for
// the whole kernel: five gather weights for the forward pass (offsets -2 .. +2, which covers the edge
// nodes' branching) and three for the backward pass.
//
// The forward pass iterates the state prices without the alphas, Q~(m+1) = G Q~(m), G the gather with
// the node discounts exp(-j dr dt) only. Since Q(m) = c_m Q~(m) with c_m = e_0 ... e_{m-1} (e = exp(-alpha
// dt)), the fit e_m = P(m+1) / S_m, S_m = sum_j Q(m, j) exp(-j dr dt), becomes
//     e_m = P(m+1) S~_{m-1} / (P(m) S~_m),   S~_{-1} = S~_0 = P(0) = 1,
// so no thread waits for another instrument-wide result within a step: one barrier per step. S~ is a
// segmented scan, within a warp by shuffles and across warps by carries in shared memory that the
// instrument's last node adds, in warp order (the result does not depend on timing), during the next
// step. The e_m are then computed in parallel. Loop counts are the bin's tallest height; instruments that
// are done idle. S~_m and then e_m live in global memory, padded per bin and transposed:
// alphas[alpha_base[b] + m * count + k] for instrument k of bin b.
#include "common.cuh"

#ifndef FLAT_MAX_THREADS
#define FLAT_MAX_THREADS 1024
#endif
#ifndef FLAT_MIN_BLOCKS
#define FLAT_MIN_BLOCKS 1
#endif

// Inclusive scan over the lanes of a warp, restarted at `segment_start` (this lane's segment's first lane).
__device__ __forceinline__ real segmented_scan(real v, int lane, int segment_start)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const real u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane - d >= segment_start) v += u;
    }
    return v;
}

// Dynamic shared memory of a block of `threads` threads (mirrored by the launcher): four rows, two sets of
// 32 warp carries, then the bin's node offsets (at most threads / 3 + 1 of them: trees are >= 3 wide).
#define FLAT_ROW(threads) ((threads) + 4)

extern "C" __global__ void __launch_bounds__(FLAT_MAX_THREADS, FLAT_MIN_BLOCKS)
    flat_price(PORTFOLIO_PARAMS, const long long* order, const int* bin_first, const int* node_offset,
               const int* bin_height, const long long* alpha_base, real* alphas, double* bond_out,
               double* option_out)
{
    const Portfolio book PORTFOLIO_ARGS;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, threads = blockDim.x;
    const int first = bin_first[blockIdx.x], count = bin_first[blockIdx.x + 1] - first;
    const int steps = bin_height[blockIdx.x];
    real* ea = alphas + alpha_base[blockIdx.x];

    extern __shared__ __align__(16) unsigned char shared[];
    real* rows = reinterpret_cast<real*>(shared);
    const int row = FLAT_ROW(threads);
    real* carries = rows + 4 * row;                      // [2][32] warp scan carries, alternate steps
    int* offsets = reinterpret_cast<int*>(carries + 64);  // [count + 1]

    for (int i = t; i < 4 * row; i += threads) rows[i] = real(0);
    for (int i = t; i < count; i += threads) offsets[i] = node_offset[first + i];
    if (t == 0) offsets[count] = node_offset[first + count - 1] + 2 * book.jmax[order[first + count - 1]] + 1;
    __syncthreads();

    // Which instrument (k) and node (p) this thread is; threads past the bin's nodes idle (k = -1).
    int k = -1;
    if (t < offsets[count]) {
        int lo = 0, hi = count - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (offsets[mid] <= t) lo = mid; else hi = mid - 1;
        }
        k = lo;
    }
    const int start = k >= 0 ? offsets[k] : offsets[count];
    const int segment_start = max(start - (warp << 5), 0);
    const long long id = k >= 0 ? order[first + k] : 0;
    const Tree tree(book, k >= 0 ? id : order[first]);
    const int p = t - start, w = tree.width, height = k >= 0 ? tree.height : -1;
    const bool last_node = k >= 0 && p == w - 1, centre = k >= 0 && p == tree.jmax;
    const real discount = real(tree.node_discount(p));

    // ---- forward: S~_m, then exp(-alpha_m dt), for m < height ----
    {
        // Gather weights of the sources p-2 .. p+2: interior neighbours, then the edge nodes' branching.
        const Branching below = tree.interior_weights(p - 1, tree.node_discount(p - 1));
        const Branching here = tree.interior_weights(p, discount);
        const Branching above = tree.interior_weights(p + 1, tree.node_discount(p + 1));
        real g[5] = {real(0), real(below.up), real(here.mid), real(above.down), real(0)};
        if (p == w - 1) g[2] += tree.top_up;
        if (p == w - 2) g[3] += tree.top_mid;
        if (p == w - 3) g[4] += tree.top_down;
        if (p == 0) g[2] += tree.bottom_down;
        if (p == 1) g[1] += tree.bottom_mid;
        if (p == 2) g[0] += tree.bottom_up;
        const bool near_edge = p <= 2 || p >= w - 3;  // only these read two nodes away

        real* Q = rows + 2;
        real* Q_next = Q + row;
        if (centre) Q[t] = real(1);
        if (last_node) ea[k] = real(1);  // S~_0
        real own = real(0);  // the last node's scan value: S~ less the carries of the instrument's earlier warps
        // S~_m of this instrument from `own` and the carries of step m (written in the loop's step m - 1).
        auto finish = [&](int m) {
            const real* carry = carries + 32 * ((m - 1) & 1);
            real sum = own;
            for (int before = warp - 1; before >= start >> 5; --before) sum += carry[before];
            ea[(long long)m * count + k] = sum;
        };
        __syncthreads();
        for (int m = 0; m + 1 < steps; ++m) {
            if (last_node && m >= 1 && m < height) finish(m);
            const bool active = m + 1 < height;
            real v = real(0);
            if (active) {
                real q = g[1] * Q[t - 1] + g[2] * Q[t] + g[3] * Q[t + 1];
                if (near_edge) q += g[0] * Q[t - 2] + g[4] * Q[t + 2];
                Q_next[t] = q;
                v = q * discount;
            }
            v = segmented_scan(v, lane, segment_start);
            if (lane == 31) carries[32 * (m & 1) + warp] = v;
            own = v;
            __syncthreads();
            real* swap = Q;
            Q = Q_next;
            Q_next = swap;
        }
        if (last_node && steps >= 2 && steps - 1 < height) finish(steps - 1);
        __syncthreads();

        // e_m from the S~: thread t takes instrument t % count and one chunk of its steps, downwards, so the
        // S~_{m-1} it reads is not yet overwritten; the one below its chunk is read before the barrier.
        const int mine = t % count, chunks = threads / count, chunk = t / count;
        const int length = (steps + chunks - 1) / chunks, low = chunk * length;
        const long long mine_row = order[first + mine];
        const int high = chunk < chunks ? min(low + length, book.height[mine_row]) : 0;
        const real below_chunk = low >= 1 && low < high ? ea[(long long)(low - 1) * count + mine] : real(1);
        __syncthreads();
        if (low < high) {
            const Tree own_tree(book, mine_row);
            double P_above = discount_bond(high * own_tree.dt, own_tree.knot_t, own_tree.knot_z, own_tree.knots);
            for (int m = high - 1; m >= low; --m) {
                const double P_here = discount_bond(m * own_tree.dt, own_tree.knot_t, own_tree.knot_z, own_tree.knots);
                const double S = ea[(long long)m * count + mine];
                const double S_before = m > low ? double(ea[(long long)(m - 1) * count + mine]) : double(below_chunk);
                ea[(long long)m * count + mine] = real(P_above * S_before / (P_here * S));
                P_above = P_here;
            }
        }
        __syncthreads();
    }

    // ---- backward: bond and option from maturity to the root ----
    // Node p reads its three sources from p + from: p-1 .. p+1 inside, p-2 .. p at the top, p .. p+2 at the bottom.
    const int from = p == w - 1 ? -2 : p == 0 ? 0 : -1;
    real c0, c1, c2;  // weights of the sources p + from, p + from + 1, p + from + 2
    if (p == w - 1) {
        c0 = tree.top_down; c1 = tree.top_mid; c2 = tree.top_up;
    } else if (p == 0) {
        c0 = tree.bottom_down; c1 = tree.bottom_mid; c2 = tree.bottom_up;
    } else {
        const Branching b = tree.interior_weights(p, discount);
        c0 = real(b.down); c1 = real(b.mid); c2 = real(b.up);
    }
    const bool call = k >= 0 && book.is_call[id];
    const int last_exercise = k >= 0 ? book.option_from[id] : 0;
    const real face = k >= 0 ? book.face[id] : real(0);
    EventCursor cursor;
    if (k >= 0) cursor.start(book, id);
    real* B = rows + 2;
    real* B_next = B + row;
    real* O = B_next + row;
    real* O_next = O + row;
    real e_next = real(0);  // exp(-alpha dt) of the next step, loaded a step ahead
    for (int i = steps; i >= 0; --i) {
        const real e = e_next;
        if (i >= 1 && i - 1 < height) e_next = ea[(long long)(i - 1) * count + k];
        if (i <= height) {
            real b, o = real(0);
            if (i == height) {
                b = face;
            } else {
                const int s = t + from;
                b = e * (c0 * B[s] + c1 * B[s + 1] + c2 * B[s + 2]);
                if (i < last_exercise) o = e * (c0 * O[s] + c1 * O[s + 1] + c2 * O[s + 2]);
            }
            real strike = real(0), coupons;
            const bool exercised = cursor.at(book, i, call, strike, coupons);
            apply_events(b, o, exercised, strike, coupons, call);
            B_next[t] = b;
            O_next[t] = o;
            if (i == 0 && centre) {
                bond_out[id] = double(b);
                option_out[id] = double(o);
            }
        }
        __syncthreads();
        real* swap = B;
        B = B_next;
        B_next = swap;
        swap = O;
        O = O_next;
        O_next = swap;
    }
}
