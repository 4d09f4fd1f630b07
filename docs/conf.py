"""Sphinx configuration of openbench's documentation (Markdown pages through myst-parser).

Build offline, warnings as errors: ``python -m sphinx -W -b html docs docs/_build/html``.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "openbench"
author = "the openbench developers"
copyright = "2026, the openbench developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx_click"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "openbench"
html_static_path: list = []
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# the pages cite code paths and files, not every one a target: only real cross-references are checked
nitpicky = False
suppress_warnings = ["myst.xref_missing"]
# no "smart" dashes or quotes: an option typed --ranks-output must print as --ranks-output, not
# with an en dash that fails when copied (tests/test_docs.py checks the built pages)
smartquotes = False
