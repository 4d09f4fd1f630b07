"""One place that turns a device name into a torch.device."""
from __future__ import annotations

import torch

from openbench.errors import InputError


def resolve_device(name: str = "auto") -> torch.device:
    """Resolve ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise InputError(f"device {name!r} was asked for, but CUDA is not available here; use --device cpu or auto")
        index = name.partition(":")[2]
        if index:
            if not index.isdigit():
                raise InputError(f"device {name!r}: expected cuda:N with N a GPU index")
            if int(index) >= torch.cuda.device_count():
                raise InputError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) are present")
        return torch.device(name)
    raise InputError(f"unknown device {name!r}: expected auto, cpu, cuda or cuda:N")
