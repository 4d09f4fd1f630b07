"""Names a package exports but imports on first use (PEP 562), so that importing the package (or
a light module of it) does not import torch, polars or pykeen."""
from importlib import import_module
from typing import Any, Callable, Dict, List, Tuple

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: Dict[str, Any], public: Dict[str, str]
                 ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The package's ``(__getattr__, __dir__)``: ``public`` maps each exported name to the module
    that defines it (``".loader"``: relative to ``package``, or an absolute module path); a name is
    imported at its first use and kept in the package's ``namespace`` from then on."""
    def __getattr__(name: str) -> Any:
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(public[name], package), name)
        namespace[name] = value
        return value

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
