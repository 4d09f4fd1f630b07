"""openbench: build, split and evaluate biomedical link-prediction benchmarks."""

__all__ = ["__version__"]

__version__ = "0.1.0"
