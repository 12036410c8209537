// A row's events (redemption, coupons, exercises) as the backward pass applies them: after rolling back to
// step s, the events of step s in table order (decreasing time; at equal times the redemption, then the
// exercises, then the coupons). An amount A due at time t and applied at step s enters the tree as
// A * P(0, t) / P(0, s dt), the forward adjustment: exactly A for an event on the grid, whose time is s dt.
// Host-compilable, like curve.cuh.
#pragma once

#include "curve.cuh"

// EVENT_CALL and EVENT_PUT are the dates of a bond with both rights (callable_puttable_bond), whose option is
// the holder's rights net (puts less calls, either sign): a call caps the holder's value bond + option at its
// amount, a put floors it there (distprice/lattice/events.py).
enum EventKind : unsigned char {
    EVENT_REDEMPTION = 0,
    EVENT_EXERCISE = 1,
    EVENT_COUPON = 2,
    EVENT_CALL = 3,
    EVENT_PUT = 4
};

HOST_DEVICE bool is_exercise(unsigned char kind)
{
    return kind == EVENT_EXERCISE || kind == EVENT_CALL || kind == EVENT_PUT;
}

// A tree's phase counts sixteenths of a step (distprice/lattice/geometry.py).
constexpr int PHASES = 16;

// The time of step s of a tree of step dt and phase: (16 s + phase) dt / 16 years for s >= 1 (one rounding, the
// division is exact; s dt itself at phase 0), 0 at the root: the event tables' times of steps, to the bit.
HOST_DEVICE double step_time(int s, double dt, int phase)
{
    return s > 0 ? double(PHASES * (long long)s + phase) * dt / PHASES : 0.0;
}

// P(0, t) / P(0, tau): the factor that carries an amount due at t to the time tau of its step.
HOST_DEVICE double forward_adjustment(double t, double tau, const double* knot_t, const double* knot_z, int knots)
{
    if (t == tau) return 1.0;
    return discount_bond(t, knot_t, knot_z, knots) / discount_bond(tau, knot_t, knot_z, knots);
}

template <class T>
HOST_DEVICE T payoff(T bond, T strike, bool call)
{
    return call ? fmax(bond - strike, T(0)) : fmax(strike - bond, T(0));
}

// One event at one node: a cash flow adds to the bond; an exercise keeps the larger of the option and its
// payoff against the bond as it stands (so it sees the cash flows later than itself, not the earlier ones); a
// call or put of a bond with both rights bounds the holder's net rights by amount - bond.
template <class T>
HOST_DEVICE void apply_event(unsigned char kind, T amount, bool call, T& bond, T& option)
{
    if (kind == EVENT_EXERCISE)
        option = fmax(option, payoff(bond, amount, call));
    else if (kind == EVENT_CALL)
        option = fmin(option, amount - bond);
    else if (kind == EVENT_PUT)
        option = fmax(option, amount - bond);
    else
        bond += amount;
}
