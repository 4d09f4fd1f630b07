"""openbench: build, split and evaluate biomedical link-prediction benchmarks.

From Python (the names load on first use, so ``import openbench`` stays light)::

    import openbench
    dataset = openbench.load_dataset("split_out")
    model = openbench.embedding_model("DistMult", entity_embeddings=E, relation_embeddings=R)
    record = openbench.evaluate(dataset, model)
    print(record.metric("both.realistic.mrr"))
"""
from openbench._lazy import lazy_exports

__version__ = "0.1.0"

_PUBLIC = {"load_dataset": ".api", "embedding_model": ".api", "from_pykeen": ".api", "score_function": ".api",
           "load_model": ".api", "evaluate": ".api", "ResultRecord": ".api", "Dataset": ".api",
           "compare": ".evaluation.statistics.compare", "popularity_model": ".models.popularity", "rules_model": ".models.rules",
           "neighbour_model": ".models.structure", "from_pyg": ".models.pyg", "save_pyg": ".models.pyg",
           "audit": "splits.audit", "from_scores": ".models.tables", "Ranking": ".evaluation.tasks.ranking",
           "Classification": ".evaluation.tasks.classification", "Repurposing": ".evaluation.tasks.repurposing"}
__all__ = ["__version__", *sorted(_PUBLIC)]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
