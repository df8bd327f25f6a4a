"""The package's version, written once: pyproject.toml takes it from here (setuptools' dynamic
version, read without importing anything), and `transcript_clean.__version__` is this one.

A module of its own so that the modules that record it (stats.py in summary.json, cli/ for
`--version`) need not import the package, whose public names sit above them. Asking
importlib.metadata instead would add a lookup of the installed distributions to every start of
the program, `--help` included.
"""

__version__ = "0.1.0"
