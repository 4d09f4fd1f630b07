"""openbench: build, split and evaluate biomedical link-prediction benchmarks."""

__version__ = "0.1.0"
