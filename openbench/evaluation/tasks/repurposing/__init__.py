"""The drug-repurposing task: which drug for which disease, measured as the field measures it.

``openbench.evaluate(dataset, model, task=openbench.Repurposing(relation="indication"))`` (the
keyword form ``task="repurposing", relations=["indication"]`` too; ``openbench evaluate --task
repurposing --relation indication``) scores every pair of a drug × disease matrix and reports, in
one record. The package holds one idea per module:

* :mod:`.options`: what a user asks (:class:`Repurposing`) and what a run reads;
* :mod:`.matrix` (:func:`define_matrix`): the drugs and diseases from the node types of the treats
  relations' ends (``type::...`` labels, or OpenBioLink's CURIE prefixes), or from curated lists;
  either orientation of a relation; the training and validation pairs of the treats relations
  are known positives (removed: the filtered setting), the test pairs are ranked; the pairs of the
  negative relations (contraindications, OpenBioLink's true negatives) are known negatives;
* :mod:`.ground_truth`: a ground-truth file's pairs (a clinical-trials or off-label set);
* :mod:`.views`: per view (the split's test pairs, a ground-truth file's) the full-matrix block
  (Recall@n per rank type, AUROC = 1 - MQR, Recall@n of the known negatives), the disease-specific
  block (each positive among all drugs of its disease: Hit@k and MRR micro and macro, per-disease
  AUROC and AUPRC averaged) and, where negatives exist, positives against known negatives as
  classification; their bootstrap intervals; the metrics themselves in :mod:`.metrics`;
* :mod:`.record`: the record, with the frequent flyers (Drug-Entropy@n and Disease-Entropy@n of the
  best pairs) and the best ``keep_top`` pairs (for ``openbench compare --stability``);
* :mod:`.txgnn`: TxGNN's protocol by name (``protocol="txgnn"``), beside the filtered numbers;
* :mod:`.summary`: what the command line prints.

The matrix is counted by :mod:`openbench.evaluation.counting.matrix` (one pass over blocks,
exact ranks as the ranking engine decides them); every number is a function of the counts.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from openbench.errors import UsageError, option
from openbench.evaluation.tasks.base import RunSettings, Task, TaskOptions
from openbench._lazy import lazy_exports
from openbench.evaluation.tasks.repurposing.options import (DEFAULT_KEEP_TOP, DEFAULT_RECALL_AT, PROTOCOLS,
                                                                Repurposing, RepurposingOptions)
from openbench.evaluation.tasks.repurposing.summary import summary_lines

# the modules that compute, loaded on first use (torch, the counting engine): the task object stays light
_PUBLIC = {"Matrix": ".matrix", "define_matrix": ".matrix", "node_type": ".matrix", "GroundTruth": ".ground_truth",
           "read_ground_truth": ".ground_truth", "repurposing_record": ".record"}
__all__ = ["DEFAULT_RECALL_AT", "DEFAULT_KEEP_TOP", "PROTOCOLS", "Repurposing", "RepurposingOptions", "summary_lines",
           "RepurposingTask", "TASK", *sorted(_PUBLIC)]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)


class RepurposingTask(Task):
    """The drug × disease matrix of a treats relation (see the package docstring)."""

    name = "repurposing"
    summary = "drug repurposing: every drug × disease pair of a treats relation ranked (Recall@n, AUROC, per disease)"
    options_type = Repurposing
    aliases = {"relations": "relation"}
    flags = ("--relation", "--negative-relation", "--drugs", "--diseases", "--recall-at", "--keep-top",
             "--ground-truth", "--cutoff", "--positive-outcomes", "--negative-outcomes", "--hits-at", "--fast", "--protocol", "--bootstrap", "--distributed", "--shard")
    flag_aliases = ("--relations",)  # the treats relations' older spelling
    block_key = "repurposing"
    headline = "auroc"
    page_metrics = ("auroc", "disease_mrr")
    # the full matrix, then each disease's drugs (repurposing_headline's keys)
    table_columns = ("auroc", "recall@100", "recall@1000", "disease_mrr", "disease_hits@10", "disease_auroc",
                     "disease_auprc")
    shards = (None, "entities")
    draws_report = True

    def check_settings(self, settings: RunSettings) -> None:
        """One process, or the matrix's drugs sharded (``shard="entities"``)."""
        if settings.shard not in self.shards:
            raise UsageError(f"the repurposing task shards the matrix's drugs: {option('shard', 'entities')}")

    def run(self, dataset, model, options: TaskOptions, settings: RunSettings):
        """The repurposing record of a scorer (ranked lists score no pair: refused)."""
        assert isinstance(options, Repurposing)
        run_options = RepurposingOptions(
            relations=options.relations(), negative_relations=list(options.negative_relations), drugs=options.drugs,
            diseases=options.diseases, recall_at=options.recall_at, hits_at=options.hits_at,
            ground_truth=options.ground_truth, cutoff=options.cutoff,
            positive_outcomes=tuple(options.positive_outcomes), negative_outcomes=tuple(options.negative_outcomes),
            keep_top=DEFAULT_KEEP_TOP if options.keep_top is None else options.keep_top,
            protocol=options.protocol or "full", bootstrap=options.bootstrap, seed=settings.seed, ranks=options.ranks,
            lower_is_better=settings.lower_is_better, progress=settings.progress)
        if settings.shard is None:
            return _repurpose(dataset, model, run_options, settings.device)
        import torch.distributed as dist

        from openbench.evaluation.counting.matrix import Shard
        from openbench.evaluation.producers.sharded import process_group

        with process_group("cpu"):
            run_options.shard = Shard(dist.get_rank(), dist.get_world_size())
            return _repurpose(dataset, model, run_options, "cpu")

    def check_record(self, record: dict) -> None:
        """:func:`~openbench.record.check_repurposing_record`."""
        from openbench.record import check_repurposing_record

        check_repurposing_record(record)

    def board_metrics(self, record: dict) -> dict:
        """The test view's headline (:func:`~openbench.record.repurposing_headline`)."""
        from openbench.record import repurposing_headline

        return repurposing_headline(record)

    def interval(self, record: dict, metric: str) -> Optional[Tuple[float, float]]:
        """The test view's bootstrap interval of ``metric`` (``--bootstrap``): the full matrix's
        AUROC and Recall@n, the disease-specific macro MRR, Hit@k, AUROC and AUPRC."""
        intervals = ((record.get("repurposing") or {}).get("confidence") or {}).get("test") or {}
        key = f"{metric}_macro" if metric == "disease_mrr" or metric.startswith("disease_hits@") else metric
        found = intervals.get(key)
        return (float(found[0]), float(found[1])) if isinstance(found, list) and len(found) == 2 else None

    def protocol_text(self, protocol: dict) -> Optional[str]:
        """The treats relations, what is filtered, what AUROC and Recall@n mean here."""
        return ("what this table holds: drug repurposing, " + ", ".join(map(str, protocol.get("relations", [])))
                + "; every drug × disease pair ranked, the training and validation pairs filtered; AUROC = 1 - mean "
                "quantile rank of the test pairs among the matrix's non-positive pairs, Recall@n the share ranked "
                "within its top n; disease_*: each test pair among its disease's drugs (macro); realistic ranks")

    def report(self, models, output, seed: int, resamples: int, inputs):
        """The full-matrix and per-disease figures (:func:`~openbench.evaluation.statistics.repurposing_figures.repurposing_report`)."""
        from openbench.evaluation.statistics.repurposing_figures import repurposing_report

        return repurposing_report(models, output, seed, resamples, inputs)

    def summary_lines(self, record: dict) -> List[str]:
        """:func:`~.summary.summary_lines`."""
        return summary_lines(record)

    def reproduce_options(self, record: dict) -> TaskOptions:
        """The record's protocol; curated lists and ground-truth files are named in the record by
        their size and hash only, so a record that used them is refused."""
        protocol, matrix = record.get("protocol") or {}, (record.get("repurposing") or {}).get("matrix") or {}
        if protocol.get("ground_truth_sha256"):
            raise UsageError("a repurposing record scored with a ground-truth file names it by its hash only; it "
                             "cannot be reproduced here")
        if "list" in str(matrix.get("drugs_from", "")) or "list" in str(matrix.get("diseases_from", "")):
            raise UsageError("a repurposing record of curated drug or disease lists names them by their size only; "
                             "it cannot be reproduced here")
        return self.options(relation=list(protocol.get("relations") or []),
                            negative_relations=list(protocol.get("negative_relations") or []),
                            recall_at=list(protocol.get("recall_at") or []) or None,
                            hits_at=list(protocol.get("hits_at") or []), keep_top=protocol.get("keep_top"),
                            protocol=protocol.get("protocol", "full"), ranks=protocol.get("ranks", "exact"),
                            bootstrap=(record["repurposing"].get("confidence") or {}).get("resamples"))

    def command_words(self, options: TaskOptions, settings: RunSettings) -> List[str]:
        """The treats and negative relations, Recall@n, Hit@k, the pairs kept, the protocol, fast
        ranks, lower-is-better scores and the resamples."""
        assert isinstance(options, Repurposing)
        words: List[str] = []
        for relation in options.relations():
            words += ["--relation", relation]
        for relation in options.negative_relations:
            words += ["--negative-relation", relation]
        if options.recall_at:
            words += ["--recall-at", ",".join(map(str, options.recall_at))]
        words += ["--hits-at", ",".join(map(str, options.hits_at))]
        if options.keep_top is not None:
            words += ["--keep-top", str(options.keep_top)]
        if options.protocol == "txgnn":
            words += ["--protocol", "txgnn"]
        if options.ranks == "fast":
            words.append("--fast")
        if settings.lower_is_better:
            words.append("--lower-is-better")
        if options.bootstrap:
            words += ["--bootstrap", str(options.bootstrap)]
        return words


def _repurpose(dataset, model, options: RepurposingOptions, device):
    """The drug × disease matrix of a scorer, on the setup's device (the scorer's tables on the
    host: the matrix's blocks are computed and counted on the device, its exact steps on the host)."""
    from openbench.evaluation.candidates import RankingSetup
    from openbench.evaluation.producers.topk import LISTS_SCORE_NOTHING, is_ranked_lists
    from openbench.evaluation.tasks.repurposing.record import repurposing_record
    from openbench.record import ResultRecord

    if is_ranked_lists(model):
        raise UsageError(LISTS_SCORE_NOTHING)
    setup = RankingSetup(dataset, device=device, seed=options.seed, lower_is_better=options.lower_is_better,
                         progress=options.progress)
    scorer = model.to(setup.device) if hasattr(model, "to") else model
    if setup.device.type != "cpu" and hasattr(scorer, "to"):
        scorer = scorer.to(type(setup.device)("cpu"))
    record = repurposing_record(dataset, scorer, options, setup.dataset_description(), str(setup.device))
    record["warnings"] = list(setup.warnings) + [w for w in getattr(scorer, "warnings", []) if w not in setup.warnings] \
        + record["warnings"]
    return ResultRecord.from_dict(record)


TASK = RepurposingTask()
