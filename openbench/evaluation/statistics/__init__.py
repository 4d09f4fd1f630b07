"""Statistics: what follows from the counts. :mod:`.metrics` (the one reduction into the record's
metric blocks), :mod:`.ranks_table` (the per-query ranks, a Parquet file), :mod:`.evidence`
(a ranks file checked as evidence), :mod:`.strata` (degree and node-type groups),
:mod:`.intervals` (bootstrap intervals), :mod:`.compare` (paired comparisons) and
:mod:`.report` (the printed table).
"""
