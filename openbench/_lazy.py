"""Names a package exports but imports on first use (PEP 562), so that importing the package (or
a light module of it) does not import torch, polars or pykeen.

This module imports nothing at its top: ``openbench`` imports it first thing, before the command
line's entry point can install its interrupt handler (:mod:`openbench.entry`), so the window in
which a Ctrl-C could still end with a traceback holds no import of its own."""
from __future__ import annotations

__all__ = ["lazy_exports"]


def lazy_exports(package, namespace, public):
    """The package's ``(__getattr__, __dir__)``: ``public`` maps each exported name to the module
    that defines it (``".loader"``: relative to ``package``, or an absolute module path); a name is
    imported at its first use and kept in the package's ``namespace`` from then on.

    :param package: the package's name; ``namespace`` its ``globals()``; ``public`` {name: module}.
    """
    def __getattr__(name: str):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(public[name], package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
