"""One place that turns a device name into a torch.device."""
from __future__ import annotations

from typing import Optional

import torch

from openbench.errors import InputError, option

__all__ = ["resolve_device"]


def resolve_device(name: str = "auto", local_rank: Optional[int] = None) -> torch.device:
    """Resolve ``"auto"`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    :param local_rank: in a distributed run, this process's rank on its machine: ``"auto"`` then
        means its own GPU, ``cuda:<local_rank>``.
    """
    name = (name or "auto").strip().lower()
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        return torch.device("cuda" if local_rank is None else f"cuda:{local_rank}")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise InputError(f"device {name!r} was asked for, but CUDA is not available here; use "
                             f"{option('device', 'cpu')} or auto")
        index = name.partition(":")[2]
        if index:
            if not index.isdigit():
                raise InputError(f"device {name!r}: expected cuda:N with N a GPU index")
            if int(index) >= torch.cuda.device_count():
                raise InputError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) are present")
        return torch.device(name)
    raise InputError(f"unknown device {name!r}: expected auto, cpu, cuda or cuda:N")
