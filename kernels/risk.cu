// Risk: trees kept between launches, rolled back under many curve bumps (distprice/lattice/sweeps.py). Rows in
// global memory grouped `lanes` threads at a time and transposed, as in outer.cu.
//
// risk_forward: one thread per tree, the forward pass of each tree (a batch row with its own rate step dr:
// the volatility bumps are trees of their own), exp(-alpha_m dt) of tree k at alphas[alpha_at[k] + m * lanes],
// in the groups of the trees' own layout.
//
// risk_roll: one thread per (task, bump), item k * bumps + b: task k rolls tree tasks[k] back under bump b on
// two rows of its own (bond, option): node p of row q of the item in lane l at rows[row_base[g] + (q * pitch[g]
// + p) * lanes + l]. The bump's exp(-alpha_i dt) is the tree's times bump_rate_factor, its events' amounts (the
// base ones of adjust.cu) times bump_event_factor. Every bump runs from the top of its tree: above the top of
// a key-rate bump's triangle it repeats the base point's arithmetic (the CPU engine starts it there from the
// base point's rows instead), work the GPU trades for a thread per bump: a task's bumps run side by side
// rather than one after another in one thread.
#include "bumps.cuh"
#include "outer.cuh"

#ifndef RISK_THREADS
#define RISK_THREADS 128
#endif

extern "C" __global__ void __launch_bounds__(RISK_THREADS)
    risk_forward(PORTFOLIO_PARAMS, int trees, const long long* order, const long long* tree_row,
                 const double* tree_dr, int lanes, const long long* row_base, const long long* alpha_at, real* rows,
                 real* alphas)
{
    const Portfolio book PORTFOLIO_ARGS;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= trees) return;
    const long long tree_id = order[k];
    const int group = k / lanes, lane = k - group * lanes;
    const Tree tree(book, tree_row[tree_id], tree_dr[tree_id]);
    // Q and the alphas interleave alike: alpha_at[tree] is alpha_base[group] + lane (the launcher's layout)
    forward(tree, rows + row_base[group] + lane, alphas + alpha_at[tree_id], lanes);
}

// The events of step i applied to every node of one bump's rows, their amounts carried by the bump.
__device__ __forceinline__ void apply_bumped_events(const Portfolio& book, const StepEvents& events, const Tree& tree,
                                                    double tau, const double* event_time, const double* grid,
                                                    const double* dz, int knots, bool call, real* B, real* O,
                                                    long long stride)
{
    for (int e = events.first; e < events.last; ++e) {
        const real amount =
            real(book.event_amount[e] * bump_event_factor(event_time[e], tau, grid, dz, knots));
        const unsigned char kind = book.event_kind[e];
        for (int p = 0; p < tree.width; ++p) {
            real b = B[p * stride], o = O[p * stride];
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
              const int* pitch, real* rows, const real* alphas, double* bond_out, double* option_out)
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

    EventCursor cursor;
    cursor.start(book, row);
    const int n_steps = tree.height;
    for (int p = 0; p < tree.width; ++p) B[p * stride] = O[p * stride] = real(0);
    for (int i = n_steps; i >= 0; --i) {
        const double tau = i * tree.dt;
        if (i < n_steps) {
            const real e = real(ea[i * ea_stride] * bump_rate_factor(tau, (i + 1) * tree.dt, grid, bump, knots));
            if (i < last_exercise)
                roll_back<true>(book, tree, e, B, O, stride, none, call);
            else
                roll_back<false>(book, tree, e, B, O, stride, none, call);
        }
        apply_bumped_events(book, cursor.at(book, i), tree, tau, event_time, grid, bump, knots, call, B, O, stride);
    }
    bond_out[item] = double(B[tree.jmax * stride]);
    option_out[item] = double(O[tree.jmax * stride]);
}
