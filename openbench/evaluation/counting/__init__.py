"""Counting: from score rows to per-query rank counts (:class:`~.counts.RankCounts`).

:mod:`.chain` walks a batch of queries through score blocks, :mod:`.kernels` counts each block
(C on CPU, Triton on CUDA, torch as the reference), :mod:`.exact` settles what the fast pass left
undecided in float64 and exact decimal, :mod:`.counts` holds the counts and their arithmetic, and
:mod:`.device` resolves where it all runs.
"""
