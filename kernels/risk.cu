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
#include "bumps.cuh"
#include "outer.cuh"

#ifndef RISK_THREADS
#define RISK_THREADS 128
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
        for (int p = 0; p < tree.width; ++p) {
            real b = B[p * stride], o = O[p * stride];
            if (held && kind == EVENT_EXERCISE)
                b = call ? fmin(b, amount) : fmax(b, amount);
            else
                apply_event(kind, amount, call, b, o);
            B[p * stride] = b;
            O[p * stride] = o;
        }
    }
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
        const double tau = i * tree.dt;
        if (i < n_steps) {
            const real e = real(ea[i * ea_stride] * bump_rate_factor(tau, (i + 1) * tree.dt, grid, bump, knots));
            if (i < last_exercise && !held)
                roll_back<true>(book, tree, e, B, O, stride, none, call);
            else
                roll_back<false>(book, tree, e, B, O, stride, none, call);
        }
        apply_bumped_events(book, cursor.at(book, i), tree, tau, event_time, grid, bump, knots, call, held, B, O,
                            stride);
    }
    const real* rolled = held ? B : O;
    double value = 0.0;
    if (cut == 0) {
        value = double(rolled[tree.jmax * stride]);
    } else {
        const real* q = saved + q_at[tree_id];
        for (int p = 0; p < tree.width; ++p) value += double(q[(long long)p * q_lanes]) * double(rolled[p * stride]);
    }
    value *= exp(-bump_exponent(cut * tree.dt, grid, bump, knots));
    double bond = 0.0, tail = 0.0;  // the cash flows, and those from the cut on, discounted on the bumped curve
    for (long long e = book.event_offsets[row]; e < book.event_offsets[row + 1]; ++e) {
        if (book.event_kind[e] == EVENT_EXERCISE) continue;
        const int step = book.event_step[e];
        const double present = double(book.event_amount[e]) *
                               discount_bond(step * tree.dt, tree.knot_t, tree.knot_z, tree.knots) *
                               exp(-bump_exponent(event_time[e], grid, bump, knots));
        bond += present;
        if (step >= cut) tail += present;
    }
    bond_out[item] = bond;
    option_out[item] = held ? (call ? tail - value : value - tail) : value;
}
