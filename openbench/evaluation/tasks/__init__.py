"""The evaluation tasks beside ranking (whose producers and count chain are the stages of
:mod:`openbench.evaluation`), each one module reached through the door
(:func:`openbench.evaluation.evaluate.evaluate`, ``task=``):

* :mod:`.classification`: a split's positives against its negatives (thresholds chosen on validation);
* :mod:`.repurposing`: which drug for which disease, over the whole drug × disease matrix and per
  disease (its metrics in :mod:`.repurposing_metrics`, TxGNN's own protocol in :mod:`.txgnn`).
"""
