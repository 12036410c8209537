"""Model calibration: Heston to option quote surfaces (differential evolution), Hull-White to swaptions.

``calibrate_heston(quotes)`` returns a surfaces table and a quotes table; ``fit_surface(surface)`` fits one
surface (one cluster task). ``calibrate_hull_white(quotes, curves)`` returns a model table of mean reversion
and volatility per model.
"""

from .heston_fit import HestonFit, Progress, calibrate_heston, fit_surface, heston_engine, heston_tables
from .heston_quotes import Surface, heston_surfaces, read_benchmark, read_quotes
from .hull_white_fit import HullWhiteFit, calibrate_hull_white, fit_hull_white, model_table
from .swaptions import Swaptions, swaption_sets

__all__ = [
    "HestonFit",
    "HullWhiteFit",
    "Progress",
    "Surface",
    "Swaptions",
    "calibrate_heston",
    "calibrate_hull_white",
    "fit_hull_white",
    "fit_surface",
    "heston_engine",
    "heston_surfaces",
    "heston_tables",
    "model_table",
    "read_benchmark",
    "read_quotes",
    "swaption_sets",
]
