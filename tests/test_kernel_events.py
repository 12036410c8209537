"""The GPU kernels' event arithmetic (kernels/events.cuh, kernels/curve.cuh) built on the host and held against
the CPU engine and the reference engine: a step's time, the forward adjustment of an amount, and a step's events
applied in order at a node."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from distprice.cuda import kernel_dir
from distprice.curves import builtin_curves
from distprice.lattice.cpu import _apply, _event_amount
from distprice.lattice.events import CALL, COUPON, EXERCISE, PUT, REDEMPTION, step_time

from utils import host_library

SHIM = """
#include "events.cuh"
extern "C" double time_of(int s, double dt, int phase) { return step_time(s, dt, phase); }
extern "C" double adjustment(double t, double tau, const double* knot_t, const double* knot_z, int knots)
{
    return forward_adjustment(t, tau, knot_t, knot_z, knots);
}
extern "C" void apply(int n, const unsigned char* kind, const double* amount, int call, double* bond, double* option)
{
    for (int e = 0; e < n; ++e) apply_event(kind[e], amount[e], call != 0, *bond, *option);
}
"""
DOUBLES = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
KINDS = np.ctypeslib.ndpointer(np.uint8, flags="C_CONTIGUOUS")


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    library = host_library(SHIM, tmp_path_factory.mktemp("events"), kernel_dir())
    library.time_of.restype = ctypes.c_double
    library.time_of.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_int]
    library.adjustment.restype = ctypes.c_double
    library.adjustment.argtypes = [ctypes.c_double, ctypes.c_double, DOUBLES, DOUBLES, ctypes.c_int]
    library.apply.argtypes = [
        ctypes.c_int,
        KINDS,
        DOUBLES,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_double),
        ctypes.POINTER(ctypes.c_double),
    ]
    return library


def test_forward_adjustment_equals_the_cpu_engines_and_the_curves(shim):
    """On trees of every phase; a step's time is the event tables' to the bit (0 at the root), ``s dt`` at phase 0."""
    curve = builtin_curves()["hull"]
    rng = np.random.default_rng(1)
    draws = zip(rng.uniform(0.0, 40.0, 500), rng.choice([1, 12, 52, 365], 500), rng.integers(-8, 8, 500))
    for t, spy, phase in draws:
        s = max(1, int(np.floor(t * spy - phase / 16 + 0.5)))
        tau = shim.time_of(s, 1.0 / spy, int(phase))
        assert tau == step_time(s, 1.0 / spy, phase)
        assert shim.time_of(s, 1.0 / spy, 0) == s * (1.0 / spy) and shim.time_of(0, 1.0 / spy, int(phase)) == 0.0
        device = shim.adjustment(t, tau, curve.t, curve.zero_rate, len(curve.t))
        assert device == pytest.approx(curve.discount(t) / curve.discount(tau), rel=1e-14)
        host = _event_amount(1.0, t, s, 1.0 / spy, phase, curve.t, curve.zero_rate)
        assert device == pytest.approx(host, rel=1e-14)
    assert shim.adjustment(5.0, 5.0, curve.t, curve.zero_rate, len(curve.t)) == 1.0  # on the grid: exactly one


@pytest.mark.parametrize("call", [True, False])
def test_a_steps_events_are_applied_in_order(shim, call):
    """An exercise sees the cash flows applied before it (later in time), not those after it."""
    kinds = np.array([REDEMPTION, EXERCISE, COUPON, EXERCISE, COUPON], dtype=np.uint8)
    amounts = np.array([100.0, 101.0, 3.0, 99.5, 2.0])
    for bond0, option0 in ((0.0, 0.0), (1.5, 0.25), (-0.5, 4.0)):
        bond, option = ctypes.c_double(bond0), ctypes.c_double(option0)
        shim.apply(len(kinds), kinds, amounts, call, ctypes.byref(bond), ctypes.byref(option))
        b, o = bond0, option0
        for kind, amount in zip(kinds, amounts):  # the rule, written out
            if kind == EXERCISE:
                o = max(o, max(b - amount, 0.0) if call else max(amount - b, 0.0))
            else:
                b += amount
        assert (bond.value, option.value) == (b, o)


def test_a_bond_with_both_rights_is_capped_at_its_calls_and_floored_at_its_puts(shim):
    """A callable_puttable_bond's dates: the holder's value, bond plus its net rights, is capped at a call's
    amount and floored at a put's, in the kernels (kernels/events.cuh) as in the CPU engine."""
    kinds = np.array([REDEMPTION, PUT, CALL, COUPON, PUT, CALL], dtype=np.uint8)
    amounts = np.array([100.0, 99.0, 101.0, 2.5, 100.5, 103.0])
    for bond0, option0 in ((0.0, 0.0), (1.5, -0.25), (-0.5, 4.0)):
        bond, option = ctypes.c_double(bond0), ctypes.c_double(option0)
        shim.apply(len(kinds), kinds, amounts, 0, ctypes.byref(bond), ctypes.byref(option))
        b, held = bond0, bond0 + option0
        B, O = np.array([bond0]), np.array([option0])
        for kind, amount in zip(kinds, amounts):  # the rule, written out on the holder's value
            if kind == CALL:
                held = min(held, amount)
            elif kind == PUT:
                held = max(held, amount)
            else:
                b += amount
                held += amount
            _apply(kind, amount, False, B, O, 0, 1)
        assert bond.value == b == B[0]
        assert option.value == O[0] == pytest.approx(held - b, abs=1e-13)
