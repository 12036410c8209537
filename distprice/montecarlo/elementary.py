"""exp and log in plain arithmetic and bit operations, so that a loop over paths calling them compiles to
vector code (libm's exp and log are calls that the compiler cannot vectorise).

    exp(x) = 2^k · P(r),  k = round(x / ln 2),  r = (x − k·ln2_hi) − k·ln2_lo  (|r| ≤ ln2 / 2),
             P the Taylor polynomial of degree 13 (truncation below 1e-17 relative); x is first clamped
             to [−708, 709], where 2^k is a normal number (NaN stays NaN).
    log(x) = k·ln2_hi + (2·atanh(s) + k·ln2_lo),  x = 2^k·m with m in [√½, √2),  s = (m − 1)/(m + 1),
             2·atanh(s) = s · Σ 2 s^(2n) / (2n + 1), n = 0 … 11 (truncation below 1e-18); x must be a
             positive normal number.

Polynomials are evaluated by Estrin's scheme (:func:`_estrin`). Both compute in float64: exp within 2 units
in the last place, log within 4 units in the last place of max(|ln x|, 1) (1 unit where x < 0.075, the
tails of AS241). A float32 argument is widened and the result rounded, which gives the float32 nearest the
value but in rare near-ties (glibc's expf and logf, which stay within 0.502 units,
differ from these once in 2 000 to 5 000 calls). The same source serves numpy arrays and, compiled,
numbers: :func:`bits` and :func:`from_bits` view an array or bit-cast a number, and the constants are a
global array that compiled code freezes into its instructions, so that loops over paths keep them in
registers and vectorise (:func:`by_precision` does the same for tables kept in both precisions).
``kernels/montecarlo.cuh`` repeats exp and log operation by operation, from the same constants.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from ..precision import PRECISIONS

_INTEGER = {np.dtype(np.float64): np.dtype(np.int64), np.dtype(np.float32): np.dtype(np.int32)}

TAYLOR, ATANH = 0, 14
"""Offsets in :data:`CONSTANTS` of 1/n! (n = 0 … 13) and 2/(2n + 1) (n = 0 … 11), lowest power first."""
LOG2E, SHIFTER, LN2_HI, LN2_LO, SQRT_HALF, EXP_MIN, EXP_MAX, ONE = range(26, 34)
"""Offsets of 1/ln 2; 1.5·2^52 (adding it rounds to an integer, which its low bits then hold); ln 2 in two
parts, the first with 42 bits so that k·ln2_hi is exact; √½; exp's clamp; 1."""
MANTISSA_BITS, EXPONENT_BIAS = 52, 1023


def _constants() -> np.ndarray:
    with localcontext() as context:
        context.prec = 40
        ln2 = Decimal(2).ln()
    ln2_hi = _leading_bits(float(ln2), 42)
    values = (
        [1.0 / math.factorial(n) for n in range(14)]
        + [2.0 / (2 * n + 1) for n in range(12)]
        + [
            1.0 / math.log(2.0),
            1.5 * 2.0**MANTISSA_BITS,
            ln2_hi,
            float(ln2 - Decimal(ln2_hi)),
            math.sqrt(0.5),
            -708.0,
            709.0,
            1.0,
        ]
    )
    values = np.array(values, dtype=np.float64)
    values.setflags(write=False)
    return values


def _leading_bits(value: float, significant: int) -> float:
    """``value`` keeping its leading ``significant`` bits (the implicit one counted)."""
    cleared = MANTISSA_BITS + 1 - significant
    return float((np.array(value).view(np.int64) >> cleared << cleared).view(np.float64))


CONSTANTS = _constants()
"""The constants of :func:`exp` and :func:`log` (float64)."""


def by_precision(make):
    """A function ``table(x)`` giving ``make(dtype)`` for x's precision: for numpy values a lookup, in
    compiled code a constant array frozen into the function (its loads fold into the instructions)."""
    tables = {dtype: make(dtype) for dtype in PRECISIONS.values()}
    for table in tables.values():
        table.setflags(write=False)

    def table(x):
        return tables[np.asarray(x).dtype]

    @overload(table, inline="always")
    def _compiled(x):
        if isinstance(x, types.Float):
            frozen = tables[np.dtype(f"float{x.bitwidth}")]
            return lambda x: frozen

    return table


def bits(x):
    """The IEEE-754 bit pattern of float ``x`` as a signed integer of its width."""
    x = np.asarray(x)
    return x.view(_INTEGER[x.dtype])


def from_bits(i, like):
    """The float of ``like``'s precision whose bit pattern is the (low bits of the) integer ``i``."""
    dtype = np.asarray(like).dtype
    return np.asarray(i).astype(_INTEGER[dtype]).view(dtype)


def to_real(x, like):
    """The unsigned 32-bit integer ``x`` as a float of ``like``'s precision, correctly rounded."""
    return np.asarray(x).astype(np.uint32).astype(np.asarray(like).dtype)


@intrinsic
def _float_to_bits(typingctx, x):
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(signature.return_type))

    return (types.int64 if x.bitwidth == 64 else types.int32)(x), codegen


@intrinsic
def _bits_to_float(typingctx, i, like):
    if not isinstance(i, types.Integer) or not isinstance(like, types.Float):
        return None

    def codegen(context, builder, signature, args):
        value, width = args[0], ir.IntType(like.bitwidth)
        if i.bitwidth > like.bitwidth:
            value = builder.trunc(value, width)
        elif i.bitwidth < like.bitwidth:
            value = builder.sext(value, width) if i.signed else builder.zext(value, width)
        return builder.bitcast(value, context.get_value_type(signature.return_type))

    return like(i, like), codegen


@intrinsic
def _uint32_to_float(typingctx, x, like):
    if not isinstance(x, types.Integer) or not isinstance(like, types.Float):
        return None

    def codegen(context, builder, signature, args):
        value = builder.trunc(args[0], ir.IntType(32)) if x.bitwidth > 32 else args[0]
        return builder.uitofp(value, context.get_value_type(signature.return_type))

    return like(x, like), codegen


@overload(bits)
def _bits_compiled(x):
    if isinstance(x, types.Float):
        return lambda x: _float_to_bits(x)


@overload(from_bits)
def _from_bits_compiled(i, like):
    if isinstance(i, types.Integer) and isinstance(like, types.Float):
        return lambda i, like: _bits_to_float(i, like)


@overload(to_real)
def _to_real_compiled(x, like):
    if isinstance(x, types.Integer) and isinstance(like, types.Float):
        return lambda x, like: _uint32_to_float(x, like)


def _exp(x):
    """e^x of float64 x (arrays or numbers)."""
    c = CONSTANTS
    x = np.minimum(np.maximum(x, c[EXP_MIN]), c[EXP_MAX])
    t = x * c[LOG2E] + c[SHIFTER]
    k = t - c[SHIFTER]
    r = (x - k * c[LN2_HI]) - k * c[LN2_LO]
    return _estrin(c, TAYLOR, r, c[TAYLOR + 12] + c[TAYLOR + 13] * r) * from_bits(
        (bits(t) - bits(c[SHIFTER]) + EXPONENT_BIAS) << MANTISSA_BITS, x
    )


def _log(x):
    """ln x of positive normal float64 x (arrays or numbers)."""
    c = CONSTANTS
    i = bits(x)
    k = (i - bits(c[SQRT_HALF])) >> MANTISSA_BITS
    m = from_bits(i - (k << MANTISSA_BITS), x)
    s = (m - c[ONE]) / (m + c[ONE])
    series = _estrin(c, ATANH, s * s, 0.0)
    kf = from_bits(bits(c[SHIFTER]) + k, x) - c[SHIFTER]  # k as a float, exactly
    return kf * c[LN2_HI] + (s * series + kf * c[LN2_LO])


def _estrin(c, k, x, high):
    """Σ_{n<12} c[k+n] x^n + high · x^12 by Estrin's scheme (pairs, then pairs of pairs: a short chain of
    dependent operations, which the processor overlaps better than Horner's)."""
    x2 = x * x
    x4 = x2 * x2
    low = (c[k] + c[k + 1] * x) + (c[k + 2] + c[k + 3] * x) * x2
    middle = (c[k + 4] + c[k + 5] * x) + (c[k + 6] + c[k + 7] * x) * x2
    upper = (c[k + 8] + c[k + 9] * x) + (c[k + 10] + c[k + 11] * x) * x2
    return (low + middle * x4) + (upper + high * x4) * (x4 * x4)


@overload(_estrin)
def _estrin_compiled(c, k, x, high):
    return _estrin


_exp_compiled = numba.njit(cache=True, error_model="numpy")(_exp)
_log_compiled = numba.njit(cache=True, error_model="numpy")(_log)


def exp(x):
    """e^x in x's precision (float64 arithmetic); arrays (numpy) or numbers (compiled)."""
    x = np.asarray(x)
    return _exp(x.astype(np.float64)).astype(x.dtype)


def log(x):
    """ln x of positive normal x in x's precision (float64 arithmetic); arrays or numbers (compiled)."""
    x = np.asarray(x)
    return _log(x.astype(np.float64)).astype(x.dtype)


@overload(exp)
def _exp_overload(x):
    if x == types.float64:
        return lambda x: _exp_compiled(x)
    if x == types.float32:
        return lambda x: np.float32(_exp_compiled(np.float64(x)))


@overload(log)
def _log_overload(x):
    if x == types.float64:
        return lambda x: _log_compiled(x)
    if x == types.float32:
        return lambda x: np.float32(_log_compiled(np.float64(x)))
