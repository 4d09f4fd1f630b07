"""OGB's link-prediction split files, read without running anything they contain.

OGB's ``LinkPropPredDataset`` leaves ``split/<split_type>/{train,valid,test}.pt``: each a
``torch.save``d dict of numpy arrays (``head``, ``relation``, ``tail``; ``head_neg`` and
``tail_neg`` (n, K) for valid/test; for ``ogbl-biokg`` also ``head_type``/``tail_type``). A ``.pt``
file is a pickle, and a pickle can name any function to call. These files are opened with torch's
weights-only unpickler, which builds only tensors and an allow-list of types: here numpy's array
reconstruction (under its numpy 2 and its older ``numpy.core`` name, which OGB's 2020 files use),
``numpy.ndarray`` and ``numpy.dtype``. A file that names anything else is refused before any of it
runs, with the names it asked for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np
import torch

from openbench.errors import InputError

__all__ = ["SAFE_NUMPY_GLOBALS", "load_split_file"]

_core = getattr(np, "_core", None) or np.core  # numpy 2 renamed numpy.core to numpy._core
_reconstruct = _core.multiarray._reconstruct
# numpy >= 1.25 rebuilds a dtype through its class (numpy.dtypes.Int64DType, …): every plain data
# type, never ObjectDType (an object array would carry arbitrary pickled objects)
_DTYPES = getattr(np, "dtypes", None)
_DTYPE_CLASSES = [getattr(_DTYPES, name) for name in dir(_DTYPES) if _DTYPES is not None and name.endswith("DType")
                  and name != "ObjectDType" and isinstance(getattr(_DTYPES, name), type)]
SAFE_NUMPY_GLOBALS = [np.ndarray, np.dtype, _reconstruct, (_reconstruct, "numpy.core.multiarray._reconstruct"),
                      *_DTYPE_CLASSES]


def load_split_file(path) -> Dict[str, object]:
    """The dict of one OGB split file: str keys, numpy arrays (or lists of type names) as values."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such OGB split file", path)
    try:
        with torch.serialization.safe_globals(SAFE_NUMPY_GLOBALS):
            data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # the unpickler raises UnpicklingError, RuntimeError or worse on a bad file
        try:
            asked = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        except Exception:
            asked = []
        allowed = {"numpy.ndarray", "numpy.dtype", "numpy._core.multiarray._reconstruct",
                   "numpy.core.multiarray._reconstruct"} | {f"numpy.dtypes.{c.__name__}" for c in _DTYPE_CLASSES}
        foreign = [name for name in asked if name not in allowed]
        reason = (f"it asks to run {', '.join(foreign[:5])}" if foreign
                  else f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        raise InputError(f"not a plain OGB split file ({reason}); refused without running it", path) from None
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise InputError(f"expected a dict of arrays keyed by name, found {type(data).__name__}", path)
    for key in ("head", "relation", "tail"):
        if key not in data:
            raise InputError(f"the split has no {key!r} array; it holds {', '.join(sorted(data))}", path)
    return data
