"""Producers: what turns a model into complete per-query rank counts under a protocol.

:mod:`.full` ranks every entity (score rows or embedding chunks, filtered), :mod:`.sampled`
each query's own negatives (OGB), :mod:`.topk` ranked lists (AnyBURL/SAFRAN files, OBL2021
submissions, a hosted benchmark's uploads), and :mod:`.sharded` any of them on several
processes, reduced as each count declares.
"""
