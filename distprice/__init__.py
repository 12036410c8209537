"""distprice: Hull-White one-factor trinomial-tree pricing of bond options, callable and puttable bonds.

``distprice.price(portfolio, curves)`` returns the priced table; see ``distprice.api``.
"""
from .api import price
from .instruments import Limits
from .problems import InvalidInputError, Problem

__all__ = ["price", "Limits", "InvalidInputError", "Problem"]
