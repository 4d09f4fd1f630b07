"""Leakage-free splits of a generated graph: random (:mod:`.random_split`) and time-slice
(:mod:`.time_split`), with negatives (:mod:`.negatives`) and leakage removal (:mod:`.leakage`),
written in OpenBioLink's split layout."""

# which training rows make an evaluation node "seen" (``--seen-nodes``): importable without polars
SEEN_RULES = ("positives", "any")
