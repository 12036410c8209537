"""Floating-point precisions of the engines: ``fp64`` (float64) and ``fp32`` (float32).

A precision is named once, where a job's options are read; from there on it travels as the numpy dtype of the
arrays an engine computes in.
"""

from __future__ import annotations

import numpy as np

from .choices import PRECISION_NAMES
from .errors import OptionError

PRECISIONS: dict[str, np.dtype] = {name: np.dtype(f"float{name[2:]}") for name in PRECISION_NAMES}
"""Each precision's numpy dtype: ``fpNN`` is ``floatNN``."""


def real_dtype(precision: str) -> np.dtype:
    """The numpy dtype of a precision name; :class:`OptionError` for an unknown name."""
    try:
        return PRECISIONS[precision]
    except (KeyError, TypeError):
        raise OptionError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}") from None


def precision_name(real) -> str:
    """The precision name of a dtype (``fp64`` or ``fp32``)."""
    return next(name for name, dtype in PRECISIONS.items() if dtype == np.dtype(real))
