// GPU-FLAT: instruments bin-packed into CUDA blocks, both levels of parallelism flattened (Pawlak et al.,
// ARRAY'21 §5). A block's bin is a row of FLAT_NODES * blockDim.x nodes holding its instruments side by
// side, each padded to a multiple of FLAT_NODES nodes; thread t owns nodes FLAT_NODES * t + u,
// u < FLAT_NODES, which all belong to one instrument (padding nodes hold zeros and are never read).
//
// Rows live in shared memory: four rows of FLAT_NODES * blockDim.x + 4 reals (two zero pads each side),
// used as Q, Q' in the forward pass and as B, B', O, O' in the backward pass. Each node's weights stay in
// registers for the whole kernel: five per pass, for the sources p-2 .. p+2, which covers the edge nodes'
// branching. A thread reads its nodes and their neighbours as one window of FLAT_NODES + 4 reals.
//
// The forward pass iterates the state prices without the alphas, Q~(m+1) = G Q~(m), G the gather with
// the node discounts exp(-j dr dt) only. Since Q(m) = c_m Q~(m) with c_m = e_0 ... e_{m-1} (e = exp(-alpha
// dt)), the fit e_m = P(m+1) / S_m, S_m = sum_j Q(m, j) exp(-j dr dt), becomes
//     e_m = P(m+1) S~_{m-1} / (P(m) S~_m),   S~_{-1} = S~_0 = P(0) = 1,
// so no thread waits for another instrument-wide result within a step: one barrier per step. S~ is a
// segmented scan, within a warp by shuffles and across warps by carries in shared memory that the
// instrument's last thread adds, in warp order (the result does not depend on timing), during the next
// step. The e_m are then computed in parallel. Loop counts are the bin's tallest height; instruments that
// are done idle. S~_m and then e_m live in global memory, padded per bin and transposed:
// alphas[alpha_base[b] + m * count + k] for instrument k of bin b. A launch of followers (common.cuh's
// Leaders) skips the forward pass: each tree reads the e_m its leader computed in a launch of leaders.
#include "common.cuh"

#ifndef FLAT_NODES
#define FLAT_NODES 1
#endif
#ifndef FLAT_MAX_THREADS
#define FLAT_MAX_THREADS 1024
#endif
#ifndef FLAT_MIN_BLOCKS
#define FLAT_MIN_BLOCKS 1
#endif
constexpr int NODES = FLAT_NODES;
constexpr int WINDOW = NODES + 4;
static_assert(NODES == 1 || NODES % 2 == 0, "FLAT_NODES is 1 or even");

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

template <class T> struct Pair;
template <> struct Pair<double> { typedef double2 type; };
template <> struct Pair<float> { typedef float2 type; };

// window[i] = row[first - 2 + i], i < WINDOW; `first` is a multiple of NODES, so pairs are aligned.
__device__ __forceinline__ void load_window(const real* row, int first, real (&window)[WINDOW])
{
    if constexpr (NODES == 1) {
#pragma unroll
        for (int i = 0; i < WINDOW; ++i) window[i] = row[first - 2 + i];
    } else {
        typedef typename Pair<real>::type pair;
        const pair* pairs = reinterpret_cast<const pair*>(row + first - 2);
#pragma unroll
        for (int i = 0; i < WINDOW / 2; ++i) {
            const pair v = pairs[i];
            window[2 * i] = v.x;
            window[2 * i + 1] = v.y;
        }
    }
}

// In fp32 a neighbouring tree may overflow: its edge nodes, read here times zero weights, would make this
// tree's 0 * inf = NaN. So the window's nodes outside this tree (p0 - 2 + i not in 0 .. w-1) read as zeros.
// (fp64 stays far from overflow: its windows are read as they are.)
__device__ __forceinline__ void keep_own(real (&window)[WINDOW], int p0, int w)
{
    if constexpr (sizeof(real) == 4) {
#pragma unroll
        for (int i = 0; i < WINDOW; ++i)
            if (p0 - 2 + i < 0 || p0 - 2 + i >= w) window[i] = real(0);
    }
}

__device__ __forceinline__ void store_nodes(real* row, int first, const real (&values)[NODES])
{
    if constexpr (NODES == 1) {
        row[first] = values[0];
    } else {
        typedef typename Pair<real>::type pair;
        pair* pairs = reinterpret_cast<pair*>(row + first);
#pragma unroll
        for (int i = 0; i < NODES / 2; ++i) pairs[i] = pair{values[2 * i], values[2 * i + 1]};
    }
}

// Rows are FLAT_ROW(threads) reals apart; the launcher mirrors this carve-up: four rows, two sets of 32
// warp carries, then the bin's node offsets (at most NODES * threads / 3 + 1 of them: trees are >= 3 wide).
#define FLAT_ROW(threads) (NODES * (threads) + 4)

extern "C" __global__ void __launch_bounds__(FLAT_MAX_THREADS, FLAT_MIN_BLOCKS)
    flat_price(PORTFOLIO_PARAMS, const long long* order, const int* bin_first, const int* node_offset,
               const int* bin_height, const long long* alpha_base, real* alphas, LEADER_PARAMS, double* bond_out,
               double* option_out)
{
    const Portfolio book PORTFOLIO_ARGS;
    const Leaders leaders LEADER_ARGS;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, threads = blockDim.x;
    const int first = bin_first[blockIdx.x], count = bin_first[blockIdx.x + 1] - first;
    const int steps = bin_height[blockIdx.x];
    real* ea = alphas + alpha_base[blockIdx.x];

    extern __shared__ __align__(16) unsigned char shared[];
    real* rows = reinterpret_cast<real*>(shared);
    const int row = FLAT_ROW(threads);
    real* carries = rows + 4 * row;                       // [2][32] warp scan carries, alternate steps
    int* offsets = reinterpret_cast<int*>(carries + 64);  // [count + 1], in nodes

    for (int i = t; i < 4 * row; i += threads) rows[i] = real(0);
    for (int i = t; i < count; i += threads) offsets[i] = node_offset[first + i];
    if (t == 0) {
        const int last_width = 2 * book.jmax[order[first + count - 1]] + 1;
        offsets[count] = node_offset[first + count - 1] + (last_width + NODES - 1) / NODES * NODES;
    }
    __syncthreads();

    // Which instrument (k) this thread's nodes belong to and the first one's index p0 in it; threads past
    // the bin's nodes idle (k = -1).
    const int node = NODES * t;
    int k = -1;
    if (node < offsets[count]) {
        int lo = 0, hi = count - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (offsets[mid] <= node) lo = mid; else hi = mid - 1;
        }
        k = lo;
    }
    const int start = k >= 0 ? offsets[k] : offsets[count];
    const int segment_start = max(start / NODES - (warp << 5), 0);
    const long long id = k >= 0 ? order[first + k] : 0;
    const Tree tree(book, k >= 0 ? id : order[first]);
    const int p0 = node - start, w = tree.width, height = k >= 0 ? tree.height : -1;
    const bool last_thread = k >= 0 && p0 <= w - 1 && w - 1 < p0 + NODES;
    const bool centre_thread = k >= 0 && p0 <= tree.jmax && tree.jmax < p0 + NODES;
    real discount[NODES];
#pragma unroll
    for (int u = 0; u < NODES; ++u) discount[u] = p0 + u < w ? real(tree.node_discount(p0 + u)) : real(0);

    // ---- forward: S~_m, then exp(-alpha_m dt), for m < height (leaders only: the whole block or none) ----
    if (!leaders.followers) {
        // Gather weights of the sources p-2 .. p+2: interior neighbours, then the edge nodes' branching.
        real g[NODES][5];
#pragma unroll
        for (int u = 0; u < NODES; ++u) {
            const int p = p0 + u;
            const Branching below = tree.interior_weights(p - 1, tree.node_discount(p - 1));
            const Branching here = tree.interior_weights(p, tree.node_discount(p));
            const Branching above = tree.interior_weights(p + 1, tree.node_discount(p + 1));
            g[u][0] = p == 2 ? tree.bottom_up : real(0);
            g[u][1] = real(below.up) + (p == 1 ? tree.bottom_mid : real(0));
            g[u][2] = real(here.mid) + (p == w - 1 ? tree.top_up : real(0)) + (p == 0 ? tree.bottom_down : real(0));
            g[u][3] = real(above.down) + (p == w - 2 ? tree.top_mid : real(0));
            g[u][4] = p == w - 3 ? tree.top_down : real(0);
            if (p >= w) g[u][0] = g[u][1] = g[u][2] = g[u][3] = g[u][4] = real(0);
        }

        real* Q = rows + 2;
        real* Q_next = Q + row;
        if (centre_thread) Q[start + tree.jmax] = real(1);
        if (last_thread) ea[k] = real(1);  // S~_0
        real own = real(0);  // the last thread's scan value: S~ less the carries of the instrument's earlier warps
        // S~_m of this instrument from `own` and the carries of step m (written in the loop's step m - 1).
        auto finish = [&](int m) {
            const real* carry = carries + 32 * ((m - 1) & 1);
            real sum = own;
            for (int before = warp - 1; before >= (start / NODES) >> 5; --before) sum += carry[before];
            ea[(long long)m * count + k] = sum;
        };
        __syncthreads();
        for (int m = 0; m + 1 < steps; ++m) {
            if (last_thread && m >= 1 && m < height) finish(m);
            real v = real(0);
            if (m + 1 < height) {
                real window[WINDOW], q[NODES];
                load_window(Q, node, window);
                keep_own(window, p0, w);
#pragma unroll
                for (int u = 0; u < NODES; ++u) {
                    q[u] = g[u][0] * window[u] + g[u][1] * window[u + 1] + g[u][2] * window[u + 2] +
                           g[u][3] * window[u + 3] + g[u][4] * window[u + 4];
                    if (m == 0 && tree.phase != 0 && k >= 0) q[u] = real(tree.root_share(p0 + u));  // the root's step
                    v += q[u] * discount[u];
                }
                store_nodes(Q_next, node, q);
            }
            v = segmented_scan(v, lane, segment_start);
            if (lane == 31) carries[32 * (m & 1) + warp] = v;
            own = v;
            __syncthreads();
            swap_rows(Q, Q_next);
        }
        if (last_thread && steps >= 2 && steps - 1 < height) finish(steps - 1);
        __syncthreads();

        alphas_from_sums(book, order + first, count, steps, ea);
    }

    // ---- backward: bond and option from maturity to the root ----
    // Node weights of the sources p-2 .. p+2: p-1 .. p+1 inside, p-2 .. p at the top, p .. p+2 at the bottom.
    real c[NODES][5];
#pragma unroll
    for (int u = 0; u < NODES; ++u) {
        const int p = p0 + u;
        const Branching b = tree.interior_weights(p, discount[u]);
        c[u][0] = p == w - 1 ? tree.top_down : real(0);
        c[u][1] = p == w - 1 ? tree.top_mid : real(b.down);
        c[u][2] = p == w - 1 ? tree.top_up : p == 0 ? tree.bottom_down : real(b.mid);
        c[u][3] = p == 0 ? tree.bottom_mid : real(b.up);
        c[u][4] = p == 0 ? tree.bottom_up : real(0);
        if (p >= w) c[u][0] = c[u][1] = c[u][2] = c[u][3] = c[u][4] = real(0);
    }
    const bool call = k >= 0 && book.is_call[id];
    const int last_exercise = k >= 0 ? book.option_from[id] : 0;
    // this tree's exp(-alpha_m dt) at my_ea[m * ea_stride]: its own, or its leader's
    const real* my_ea = ea;
    long long ea_stride = count;
    if (k >= 0) {
        my_ea = leaders.followers ? leaders.of(id) : ea + k;
        ea_stride = leaders.followers ? leaders.stride[id] : count;
    }
    EventCursor cursor;
    if (k >= 0) cursor.start(book, id);
    real* B = rows + 2;
    real* B_next = B + row;
    real* O = B_next + row;
    real* O_next = O + row;
    real e_next = real(0);  // exp(-alpha dt) of the next step, loaded a step ahead
    for (int i = steps; i >= 0; --i) {
        const real e = e_next;
        if (i >= 1 && i - 1 < height) e_next = my_ea[(i - 1) * ea_stride];
        if (i <= height) {
            real b[NODES], o[NODES];
            if (i == height) {
#pragma unroll
                for (int u = 0; u < NODES; ++u) {
                    b[u] = real(0);
                    o[u] = real(0);
                }
            } else {
                real window[WINDOW];
                load_window(B, node, window);
                keep_own(window, p0, w);
#pragma unroll
                for (int u = 0; u < NODES; ++u)
                    b[u] = e * (c[u][0] * window[u] + c[u][1] * window[u + 1] + c[u][2] * window[u + 2] +
                                c[u][3] * window[u + 3] + c[u][4] * window[u + 4]);
                if (i < last_exercise) {
                    load_window(O, node, window);
                    keep_own(window, p0, w);
#pragma unroll
                    for (int u = 0; u < NODES; ++u)
                        o[u] = e * (c[u][0] * window[u] + c[u][1] * window[u + 1] + c[u][2] * window[u + 2] +
                                    c[u][3] * window[u + 3] + c[u][4] * window[u + 4]);
                } else {
#pragma unroll
                    for (int u = 0; u < NODES; ++u) o[u] = real(0);
                }
            }
            if (i == 0 && tree.phase != 0 && centre_thread) {  // the root's first step of its own
#pragma unroll
                for (int u = 0; u < NODES; ++u) {
                    if (p0 + u == tree.jmax) {
                        b[u] = tree.root_value(e, B + start, 1);
                        o[u] = i < last_exercise ? tree.root_value(e, O + start, 1) : real(0);
                    }
                }
            }
            const StepEvents events = cursor.at(book, i);
#pragma unroll
            for (int u = 0; u < NODES; ++u) {
                apply_events(book, events, call, b[u], o[u]);
                if (p0 + u >= w) b[u] = o[u] = real(0);  // padding
            }
            store_nodes(B_next, node, b);
            store_nodes(O_next, node, o);
            if (i == 0 && centre_thread) {
#pragma unroll
                for (int u = 0; u < NODES; ++u) {
                    if (p0 + u == tree.jmax) {
                        bond_out[id] = double(b[u]);
                        option_out[id] = double(o[u]);
                    }
                }
            }
        }
        __syncthreads();
        swap_rows(B, B_next);
        swap_rows(O, O_next);
    }
}
