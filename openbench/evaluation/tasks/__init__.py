"""The evaluation tasks, each one object with one interface (:mod:`.base`), found by name through
the task registry (:mod:`openbench.task_registry`) and run by the door
(:func:`openbench.evaluation.evaluate.evaluate`, ``task=``):

* :mod:`.ranking`: filtered link prediction, its producers and count chain the stages of
  :mod:`openbench.evaluation`;
* :mod:`.classification`: a split's positives against its negatives (thresholds chosen on validation);
* :mod:`.repurposing`: which drug for which disease, over the whole drug × disease matrix and per
  disease (a package, one module per idea).

A new task is one module defining ``TASK`` and one line of the registry's list.
"""
