"""Sphinx configuration of distprice's documentation.

Build it from the repository root with ``python -m sphinx -W -b html docs build/docs`` (the test extra installs
Sphinx and sphinx-click); ``tests/test_docs.py`` builds it the same way and runs every example.
"""

import importlib.metadata
import os
import sys

# the package of this checkout, installed or not
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

project = "distprice"
author = "the distprice authors"
copyright = "2026, the distprice authors"
try:
    release = importlib.metadata.version("distprice")
except importlib.metadata.PackageNotFoundError:
    release = "0+unknown"
version = release

extensions = [
    # the API reference, from the docstrings (plain reST: no napoleon, whose Google-style parsing would read
    # "text: more" in attribute docstrings as a type)
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",  # the model's formulas
    "sphinx_click",  # the command-line reference, from the click commands
]

root_doc = "index"
exclude_patterns = ["_build"]
templates_path = []
default_role = "literal"  # `x` in a page or a docstring is code, as in the package's docstrings

autodoc_member_order = "bysource"
autodoc_typehints = "signature"

html_theme = "alabaster"
html_theme_options = {
    "description": "Pricing large portfolios on many GPUs with Dask",
    "fixed_sidebar": True,
    "page_width": "1240px",
    "sidebar_width": "250px",
}
html_static_path = []
html_title = f"distprice {release}"
