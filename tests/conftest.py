"""pytest configuration: the helpers live in tests/helpers.py.

Without a GPU, Triton kernels (where Triton is installed) run in Triton's interpreter on CPU
tensors; the flag must be set before Triton is first imported.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    """The dataset cache of the tests lives in a temporary folder, never in the user's cache."""
    import tempfile

    os.environ.setdefault("OPENBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="openbench-test-cache-"))
