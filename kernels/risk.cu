// Risk: trees kept between launches, rolled back under many curve bumps (distprice/lattice/sweeps.py). Rows in
// global memory grouped `lanes` threads at a time and transposed, as in outer.cu.
//
// risk_forward: one thread per tree, the forward pass of each tree (a batch row with its own rate step dr:
// the volatility bumps are trees of their own), exp(-alpha_m dt) of tree k at alphas[alpha_at[k] + m * lanes],
// in the groups of the trees' own layout, and its state prices at its cut step (its row's first exercise,
// distprice/lattice/sweeps.py) in `saved`, laid out as the scratch rows.
//
// risk_roll: one thread per (task, bump), item k * bumps + b: task k rolls tree tasks[k] back under bump b on
// two rows of its own (bond, option): node p of row q of the item in lane l at rows[row_base[g] + (q * pitch[g]
// + p) * lanes + l]. The bump's exp(-alpha_i dt) is the tree's times bump_rate_factor, its events' amounts (the
// base ones of adjust.cu) times bump_event_factor. Every bump runs from the top of its tree: above the top of
// a key-rate bump's triangle it repeats the base point's arithmetic (the CPU engine starts it there from the
// base point's rows instead), work the GPU trades for a thread per bump: a task's bumps run side by side
// rather than one after another in one thread. It stops at the tree's cut: below it the option is only
// discounted, and its value at the root is sum_j Q(cut, j) O(cut, j) r(t_cut). A row `embedded` (a callable or
// puttable bond) rolls one row back, the holder's value (bond less call, capped at the call price by an
// exercise; plus put, floored at the put price), its option then the bond's cash flows from the cut on less
// that (or that less them). The bond's value at the root is its cash flows discounted on the bumped curve.
//
// risk_forward_block: risk_forward's pass, one block per group of trees that share one (see there).
//
// risk_roll_block: the same roll, one block per (task, bump) item, for trees of at most `span` nodes: the threads
// share the nodes of each step (thread t nodes t, t + blockDim.x, ...) on double-buffered rows in shared memory
// (the node weights in the threads' registers), one barrier a step, and the bump's factors (each step's exp(-alpha
// dt), each event's amount) computed ahead a window at a time, a step or an event per thread. As the CPU engine
// does, a bump that agrees with its task's bump 0 from some step up (a key rate's, above the top of its triangle)
// starts there from bump 0's rows, which bump 0 (launched first) keeps in `snapshots`. A roll of one bump over n
// trees (an OAS evaluation) gives the GPU n blocks where risk_roll gives it n threads. Node for node it is
// risk_roll's arithmetic (the node discounts walked as outer.cuh's NodeWalk walks them), and the values at the root
// are summed in the same order.
#include "bumps.cuh"
#include "outer.cuh"

#ifndef RISK_THREADS
#define RISK_THREADS 128
#endif
#ifndef RISK_EVENT_WINDOW
#define RISK_EVENT_WINDOW 256
#endif
#ifndef RISK_BLOCK_NODES
#define RISK_BLOCK_NODES 128
#endif

extern "C" __global__ void __launch_bounds__(RISK_THREADS)
    risk_forward(PORTFOLIO_PARAMS, int trees, const long long* order, const long long* tree_row,
                 const double* tree_dr, int lanes, const long long* row_base, const long long* alpha_at, real* rows,
                 real* alphas, const long long* tree_cut, real* saved)
{
    const Portfolio book PORTFOLIO_ARGS;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= trees) return;
    const long long tree_id = order[k];
    const int group = k / lanes, lane = k - group * lanes;
    const Tree tree(book, tree_row[tree_id], tree_dr[tree_id]);
    // Q and the alphas interleave alike: alpha_at[tree] is alpha_base[group] + lane (the launcher's layout)
    forward(tree, rows + row_base[group] + lane, alphas + alpha_at[tree_id], lanes, int(tree_cut[tree_id]),
            saved + row_base[group] + lane);
}

// exp(-j dr dt) of node p as outer.cuh's NodeWalk walks it: afresh every 32 nodes, times exp(-dr dt) (`ratio`)
// in between.
__device__ __forceinline__ double walked_discount(const Tree& tree, double ratio, int p)
{
    const int first = p & ~31;
    double d = tree.node_discount(first);
    for (int q = first + 1; q <= p; ++q) d *= ratio;
    return d;
}

// A block thread's nodes: t, t + blockDim.x, ... (at most RISK_NODES of them, as the launcher's warp count per
// RISK_BLOCK_NODES nodes makes sure); their weights stay in the thread's registers.
constexpr int RISK_NODES = RISK_BLOCK_NODES / 32;

// risk_forward's pass, one block per group of trees that share one (distprice/lattice/groups.py: its tallest
// tree, the group's leader, at most `span` nodes wide; threads over the nodes, double-buffered state prices in
// shared memory): exp(-alpha_m dt) at alphas[alpha_at[tree] + m], the state prices at each of the group's cut
// steps m = keep_steps[k], k in keep_lo[tree] .. keep_hi[tree] (increasing), their nodes |j| <= min(m, jmax)
// only, node p at saved[keep_row[k] + p] (distprice/lattice/groups.py's KeptStates). Its sums
// S_m = sum_j Q(m, j) exp(-j dr dt) are added up by warps (in a fixed order, not node by node), so its
// exp(-alpha_m dt) can differ from risk_forward's in the last bits.
extern "C" __global__ void risk_forward_block(PORTFOLIO_PARAMS, const long long* order, int span,
                                              const long long* tree_row, const double* tree_dr,
                                              const long long* alpha_at, real* alphas, const long long* keep_lo,
                                              const long long* keep_hi, const long long* keep_steps,
                                              const long long* keep_row, real* saved)
{
    extern __shared__ unsigned char shared_bytes[];
    __shared__ real partial[32];
    __shared__ real step_e;
    const Portfolio book PORTFOLIO_ARGS;
    const int t = threadIdx.x, threads = blockDim.x, lane = t & 31, warp = t >> 5, warps = threads >> 5;
    const long long tree_id = order[blockIdx.x];
    const Tree tree(book, tree_row[tree_id], tree_dr[tree_id]);
    const int w = tree.width;
    long long keep = keep_lo[tree_id];
    real* Q = reinterpret_cast<real*>(shared_bytes);
    real* Q_next = Q + span;
    real* ea = alphas + alpha_at[tree_id];
    // per own node p: the weight from p - 1 up, p's own, from p + 1 down, and p's discount
    real from_below[RISK_NODES], own[RISK_NODES], from_above[RISK_NODES], discount[RISK_NODES];
    const double ratio = exp(-tree.drdt);
#pragma unroll
    for (int u = 0; u < RISK_NODES; ++u) {
        const int p = t + u * threads;
        if (p >= w) break;
        const double d = walked_discount(tree, ratio, p);
        from_below[u] = p > 0 ? real(tree.interior_weights(p - 1, walked_discount(tree, ratio, p - 1)).up) : real(0);
        own[u] = real(tree.interior_weights(p, d).mid);
        from_above[u] = p + 1 < w ? real(tree.interior_weights(p + 1, walked_discount(tree, ratio, p + 1)).down)
                                  : real(0);
        discount[u] = real(d);
    }
    for (int p = t; p < w; p += threads) Q[p] = p == tree.jmax ? real(1) : real(0);
    __syncthreads();
    real s = real(1);  // sum_j Q(m, j) exp(-j dr dt), in thread 0
    int hint = 0;
    for (int m = 0;; ++m) {
        if (keep < keep_hi[tree_id] && keep_steps[keep] == m) {
            real* row = saved + keep_row[keep];
            const int reach = min(m, tree.jmax);
            for (int p = tree.jmax - reach + t; p <= tree.jmax + reach; p += threads) row[p] = Q[p];
            ++keep;
        }
        if (t == 0) {
            step_e = real(discount_bond(tree.time(m + 1), tree.knot_t, tree.knot_z, tree.knots, hint) / s);
            ea[m] = step_e;
        }
        __syncthreads();
        if (m == tree.height - 1) break;
        const real e = step_e, top_flow = e * Q[w - 1], bottom_flow = e * Q[0];
        real v = real(0);
#pragma unroll
        for (int u = 0; u < RISK_NODES; ++u) {
            const int p = t + u * threads;
            if (p >= w) break;
            const real below = p > 0 ? from_below[u] * Q[p - 1] : real(0);
            const real above = p + 1 < w ? from_above[u] * Q[p + 1] : real(0);
            real q = e * (below + own[u] * Q[p] + above) + edge_inflow(tree, p, top_flow, bottom_flow);
            if (m == 0 && tree.phase != 0) q = e * real(tree.root_share(p));  // the root's first step of its own
            Q_next[p] = q;
            v += q * discount[u];
        }
        v = warp_sum(v);
        if (lane == 0) partial[warp] = v;
        __syncthreads();
        if (t == 0) {
            s = real(0);
            for (int k = 0; k < warps; ++k) s += partial[k];
        }
        swap_rows(Q, Q_next);
    }
}

// One event of a bumped step at one node (`held`: B is the holder's value, capped or floored by an exercise; a
// callable_puttable_bond's call caps it, its put floors it).
__device__ __forceinline__ void apply_held_event(unsigned char kind, real amount, bool call, bool held, real& b,
                                                 real& o)
{
    if (held && kind == EVENT_EXERCISE)
        b = call ? fmin(b, amount) : fmax(b, amount);
    else if (held && (kind == EVENT_CALL || kind == EVENT_PUT))
        b = kind == EVENT_CALL ? fmin(b, amount) : fmax(b, amount);
    else
        apply_event(kind, amount, call, b, o);
}

// The events of step i applied to every node of one bump's rows, their amounts carried by the bump (`held`:
// B is the holder's value, which an exercise caps or floors at its price).
__device__ __forceinline__ void apply_bumped_events(const Portfolio& book, const StepEvents& events, const Tree& tree,
                                                    double tau, const double* event_time, const double* grid,
                                                    const double* dz, int knots, bool call, bool held, real* B,
                                                    real* O, long long stride)
{
    for (int e = events.first; e < events.last; ++e) {
        const real amount =
            real(book.event_amount[e] * bump_event_factor(event_time[e], tau, grid, dz, knots));
        const unsigned char kind = book.event_kind[e];
        for (int p = 0; p < tree.width; ++p) apply_held_event(kind, amount, call, held, B[p * stride], O[p * stride]);
    }
}

// The item's values at the root from its rolled rows (`rolled`, nodes `stride` apart: the holder's value or the
// option) at its cut, and its bond's cash flows discounted on the bumped curve, into bond_out and option_out.
__device__ void finish_item(const Portfolio& book, const Tree& tree, long long row, long long item, const real* rolled,
                            long long stride, int cut, const real* q, int q_lanes, bool call, bool held,
                            const double* event_time, const double* grid, const double* bump, int knots,
                            double* bond_out, double* option_out)
{
    double value = 0.0;
    if (cut == 0) {
        value = double(rolled[tree.jmax * stride]);
    } else {  // the state prices at the cut reach the nodes |j| <= min(cut, jmax)
        const int reach = min(cut, tree.jmax);
        for (int p = tree.jmax - reach; p <= tree.jmax + reach; ++p)
            value += double(q[(long long)p * q_lanes]) * double(rolled[p * stride]);
    }
    value *= exp(-bump_exponent(tree.time(cut), grid, bump, knots));
    double bond = 0.0, tail = 0.0;  // the cash flows, and those from the cut on, discounted on the bumped curve
    for (long long e = book.event_offsets[row]; e < book.event_offsets[row + 1]; ++e) {
        if (is_exercise(book.event_kind[e])) continue;
        const int step = book.event_step[e];
        const double present = double(book.event_amount[e]) *
                               discount_bond(tree.time(step), tree.knot_t, tree.knot_z, tree.knots) *
                               exp(-bump_exponent(event_time[e], grid, bump, knots));
        bond += present;
        if (step >= cut) tail += present;
    }
    bond_out[item] = bond;
    option_out[item] = held ? (call ? tail - value : value - tail) : value;
}

extern "C" __global__ void __launch_bounds__(RISK_THREADS)
    risk_roll(PORTFOLIO_PARAMS, const double* event_time, int n, const long long* order, const long long* tasks,
              const long long* tree_row, const double* tree_dr, const long long* alpha_at, int alpha_lanes,
              int bumps, int knots, const double* grid, const double* dz, int lanes, const long long* row_base,
              const int* pitch, real* rows, const real* alphas, double* bond_out, double* option_out,
              const long long* tree_cut, const long long* q_at, int q_lanes, const real* saved,
              const unsigned char* embedded)
{
    const Portfolio book PORTFOLIO_ARGS;
    const int slot = blockIdx.x * blockDim.x + threadIdx.x;
    if (slot >= n) return;
    const long long item = order[slot], k = item / bumps, tree_id = tasks[k], row = tree_row[tree_id];
    const int group = slot / lanes, lane = slot - group * lanes;
    const long long stride = lanes, row_pitch = (long long)pitch[group] * stride;
    real* B = rows + row_base[group] + lane;
    real* O = B + row_pitch;
    const real* ea = alphas + alpha_at[tree_id];
    const long long ea_stride = alpha_lanes;
    const Tree tree(book, row, tree_dr[tree_id]);
    const bool call = book.is_call[row];
    const int last_exercise = book.option_from[row];
    const double* bump = dz + item * knots;
    const StepEvents none{0, 0, false};

    const int cut = int(tree_cut[tree_id]);
    const bool held = embedded[row];

    EventCursor cursor;
    cursor.start(book, row);
    const int n_steps = tree.height;
    for (int p = 0; p < tree.width; ++p) B[p * stride] = O[p * stride] = real(0);
    for (int i = n_steps; i >= cut; --i) {
        const double tau = tree.time(i);
        if (i < n_steps) {
            const real e = real(ea[i * ea_stride] * bump_rate_factor(tau, tree.time(i + 1), grid, bump, knots));
            const bool with_option = i < last_exercise && !held;
            if (i == 0 && tree.phase != 0) {  // the root's first step of its own: only its node is read
                const real b = tree.root_value(e, B, stride), o = with_option ? tree.root_value(e, O, stride) : real(0);
                B[tree.jmax * stride] = b;
                if (with_option) O[tree.jmax * stride] = o;
            } else if (with_option) {
                roll_back<true>(book, tree, e, B, O, stride, none, call);
            } else {
                roll_back<false>(book, tree, e, B, O, stride, none, call);
            }
        }
        apply_bumped_events(book, cursor.at(book, i), tree, tau, event_time, grid, bump, knots, call, held, B, O,
                            stride);
    }
    finish_item(book, tree, row, item, held ? B : O, stride, cut, saved + (cut ? q_at[tree_id] : 0), q_lanes, call,
                held, event_time, grid, bump, knots, bond_out, option_out);
}

extern "C" __global__ void
    risk_roll_block(PORTFOLIO_PARAMS, const double* event_time, const long long* order, int span,
                    const long long* tasks, const long long* tree_row, const double* tree_dr,
                    const long long* alpha_at, int alpha_lanes, int bumps, int knots, const double* grid,
                    const double* dz, const real* alphas, double* bond_out, double* option_out,
                    const long long* tree_cut, const long long* q_at, int q_lanes, const real* saved,
                    const unsigned char* embedded, const int* item_top, const long long* item_from,
                    const long long* save_offsets, const int* save_step, const long long* save_at, real* snapshots)
{
    extern __shared__ unsigned char shared_bytes[];
    const Portfolio book PORTFOLIO_ARGS;
    const int t = threadIdx.x, threads = blockDim.x;
    const long long item = order[blockIdx.x], k = item / bumps, tree_id = tasks[k], row = tree_row[tree_id];
    const Tree tree(book, row, tree_dr[tree_id]);
    const int w = tree.width;
    real* B = reinterpret_cast<real*>(shared_bytes);
    real* B_next = B + span;
    real* O = B_next + span;
    real* O_next = O + span;
    real* rate = O_next + span;
    real* amount = rate + threads;
    const real* ea = alphas + alpha_at[tree_id];
    const bool call = book.is_call[row];
    const int last_exercise = book.option_from[row];
    const double* bump = dz + item * knots;
    const int cut = int(tree_cut[tree_id]);
    const bool held = embedded[row];

    // The item's first step: the top of the tree (zero rows, then its events), or a step where it agrees with
    // the task's bump 0, whose rows after that step's events it takes from `snapshots` (item_from >= 0).
    const int top = item_top[item];
    const long long from = item_from[item];
    real up[RISK_NODES], mid[RISK_NODES], down[RISK_NODES];  // of the thread's own nodes
    const double ratio = exp(-tree.drdt);
#pragma unroll
    for (int u = 0; u < RISK_NODES; ++u) {
        const int p = t + u * threads;
        if (p >= w) break;
        const Branching weight = tree.interior_weights(p, walked_discount(tree, ratio, p));
        up[u] = real(weight.up);
        mid[u] = real(weight.mid);
        down[u] = real(weight.down);
    }
    for (int p = t; p < w; p += threads) {
        B[p] = from < 0 ? real(0) : snapshots[from + p];
        O[p] = from < 0 ? real(0) : snapshots[from + w + p];
    }
    __syncthreads();

    EventCursor cursor;
    cursor.start(book, row);
    while (cursor.next < cursor.end && (book.event_step[cursor.next] > top ||
                                        (from >= 0 && book.event_step[cursor.next] == top)))
        ++cursor.next;
    // Bump 0 keeps its rows after the events of the steps other bumps of its task start from (decreasing).
    long long save = item % bumps == 0 ? save_offsets[k] : 0;
    const long long saves_end = item % bumps == 0 ? save_offsets[k + 1] : 0;
    // The bump's factors, computed a window at a time by the threads side by side: exp(-alpha_i dt) of the
    // next `threads` steps down (rate[i_top - i]), and the amounts of the next RISK_EVENT_WINDOW events
    // (amount[e - e_low]), each exactly as risk_roll computes it in its step.
    int i_top = -1, i_low = top + 1, e_low = cursor.next, e_high = cursor.next;
    for (int i = top; i >= cut; --i) {
        const double tau = tree.time(i);
        const StepEvents events = cursor.at(book, i);
        const bool rolls = i < top, with_option = i < last_exercise && !held;
        const bool new_rates = rolls && i < i_low, new_events = events.last > e_high &&
                                                                events.last - events.first <= RISK_EVENT_WINDOW;
        if (new_rates) {
            i_top = i;
            i_low = max(cut, i - threads + 1);
            const int s = i - t;
            if (s >= i_low)
                rate[t] = real(ea[s * alpha_lanes] *
                               bump_rate_factor(tree.time(s), tree.time(s + 1), grid, bump, knots));
        }
        if (new_events) {
            e_low = events.first;
            e_high = min(cursor.end, e_low + RISK_EVENT_WINDOW);
            for (int ev = e_low + t; ev < e_high; ev += threads)
                amount[ev - e_low] = real(book.event_amount[ev] * bump_event_factor(event_time[ev],
                                          tree.time(book.event_step[ev]), grid, bump, knots));
        }
        if (new_rates || new_events) __syncthreads();
        const real e = rolls ? rate[i_top - i] : real(0);
#pragma unroll
        for (int u = 0; u < RISK_NODES; ++u) {
            const int p = t + u * threads;
            if (p >= w) break;
            real b = B[p], o = O[p];
            if (rolls) {
                if (p == w - 1) {
                    b = e * (tree.top_up * B[p] + tree.top_mid * B[p - 1] + tree.top_down * B[p - 2]);
                    if (with_option) o = e * (tree.top_up * O[p] + tree.top_mid * O[p - 1] + tree.top_down * O[p - 2]);
                } else if (p == 0) {
                    b = e * (tree.bottom_up * B[2] + tree.bottom_mid * B[1] + tree.bottom_down * B[0]);
                    if (with_option) o = e * (tree.bottom_up * O[2] + tree.bottom_mid * O[1] + tree.bottom_down * O[0]);
                } else {
                    b = e * (up[u] * B[p + 1] + mid[u] * B[p] + down[u] * B[p - 1]);
                    if (with_option) o = e * (up[u] * O[p + 1] + mid[u] * O[p] + down[u] * O[p - 1]);
                }
            }
            B_next[p] = b;
            O_next[p] = o;
        }
        if (rolls && i == 0 && tree.phase != 0 && t == tree.jmax % threads) {  // the root's first step of its own,
            B_next[tree.jmax] = tree.root_value(e, B, 1);                      // by the thread of its node
            if (with_option) O_next[tree.jmax] = tree.root_value(e, O, 1);
        }
        for (int ev = events.first; ev < events.last; ++ev) {  // a thread's own nodes: no barrier before
            const real value = ev < e_high ? amount[ev - e_low]  // beyond the window: a step of many events
                                           : real(book.event_amount[ev] * bump_event_factor(event_time[ev], tau, grid,
                                                                                            bump, knots));
            const unsigned char kind = book.event_kind[ev];
            for (int p = t; p < w; p += threads) apply_held_event(kind, value, call, held, B_next[p], O_next[p]);
        }
        if (save < saves_end && save_step[save] == i) {
            for (int p = t; p < w; p += threads) {
                snapshots[save_at[save] + p] = B_next[p];
                snapshots[save_at[save] + w + p] = O_next[p];
            }
            ++save;
        }
        __syncthreads();
        swap_rows(B, B_next);
        swap_rows(O, O_next);
    }
    if (t == 0)
        finish_item(book, tree, row, item, held ? B : O, 1, cut, saved + (cut ? q_at[tree_id] : 0), q_lanes, call,
                    held, event_time, grid, bump, knots, bond_out, option_out);
}
