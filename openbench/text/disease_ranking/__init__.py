"""Phenotype-driven disease ranking, evaluated: patients' HPO terms ranked against an HPO
knowledge base, results kept in a resumable per-case cache, and scored.

* :mod:`.case_sets`: PhenoBrain and MME test sets (cases: HPO terms and true diseases);
* :mod:`.knowledge_base`: the HPO knowledge base and four vectorised similarity methods;
* :mod:`.cache`: the per-case JSON cache (concurrent writers merge under a lock, resumable);
* :mod:`.metrics`: top-k (micro/macro), median rank and MRR with explicit tie policies;
* :mod:`.runs`: running methods over a test set into the cache, and evaluating a cache
  (``openbench text rank-diseases`` and ``rank-eval``).
"""
