"""Dataset loading, filter index, rank counts, metrics, evaluators and scorers.

Importing this package imports torch and polars; the CLI does so only inside its commands.
"""
from openbench.evaluation.dataset import Dataset, load_dataset
from openbench.evaluation.device import resolve_device
from openbench.evaluation.evaluator import EmbeddingEvaluator, Evaluator
from openbench.evaluation.filter_index import FilterIndex
from openbench.evaluation.ranking import RankCounts, rank_counts
from openbench.evaluation.scorers import SCORERS, build_scorer

__all__ = ["Dataset", "load_dataset", "resolve_device", "Evaluator", "EmbeddingEvaluator", "FilterIndex",
           "RankCounts", "rank_counts", "SCORERS", "build_scorer"]
