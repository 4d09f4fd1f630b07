"""pytest configuration: the helpers live in tests/helpers.py.

Without a GPU, Triton kernels (where Triton is installed) run in Triton's interpreter on CPU
tensors; the flag must be set before Triton is first imported.
"""
import os

# MKL's results depend on memory alignment unless its reproducible mode is on (what the command
# line sets, openbench.entry): before torch loads MKL, so that trained arrays are byte-identical
os.environ.setdefault("MKL_CBWR", "AUTO")

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's import would ask PyPI for its latest version


def pytest_configure(config):
    """The dataset cache of the tests lives in a temporary folder, never in the user's cache."""
    import tempfile

    os.environ.setdefault("OPENBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="openbench-test-cache-"))


# property tests are deterministic by default, so that a regression fails every run, not one in
# three; HYPOTHESIS_PROFILE=explore draws new examples each run
from hypothesis import settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
