"""distprice: Hull-White one-factor trinomial-tree pricing of bond options, callable and puttable bonds.

``distprice.price(portfolio, curves)`` returns the priced table (see ``distprice.api``);
``distprice.Pricer`` keeps one Dask cluster across pricing jobs (see ``distprice.runtime``).
"""
from .api import price
from .instruments import Limits
from .errors import InvalidInputError, Problem

__all__ = ["price", "Pricer", "Limits", "InvalidInputError", "Problem"]


def __getattr__(name: str):
    # the Dask runtime is imported when first asked for: pricing in this process does not need it
    if name == "Pricer":
        from .runtime import Pricer

        return Pricer
    raise AttributeError(f"module 'distprice' has no attribute {name!r}")
