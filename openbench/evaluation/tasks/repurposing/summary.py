"""What ``openbench evaluate --task repurposing`` prints of a record (:func:`summary_lines`)."""
from __future__ import annotations

from typing import List

__all__ = ["summary_lines"]


def summary_lines(record: dict) -> List[str]:
    """The table ``openbench evaluate --task repurposing`` prints: the protocol line, then per view
    the full-matrix and disease-specific numbers (realistic ranks), TxGNN's beside them."""
    from openbench._io.outputs import visible

    result, protocol = record["repurposing"], record["protocol"]
    matrix = result["matrix"]

    def show(value) -> str:
        return "-" if value is None else f"{value:.4f}"

    lines = [f"model {visible(record['model'].get('name'))} on {visible(record['dataset'].get('path'))}: repurposing, "
             f"{', '.join(map(visible, protocol['relations']))} (scored as {matrix['scored_as']}); matrix "
             f"{matrix['drugs']:,} drugs × {matrix['diseases']:,} diseases = {matrix['pairs']:,} pairs; filtered (the "
             f"{matrix['known_positive_pairs']:,} training and validation pairs removed); realistic rank (ties: the "
             f"mean of the tied places); ranks {protocol['ranks']}; Recall@n for n = "
             f"{', '.join(map(str, protocol['recall_at']))}; Hit@k for k = {', '.join(map(str, protocol['hits_at']))}"]
    for name, view in result["views"].items():
        full = view.get("full_matrix")
        lines.append(f"{name} view: {view['positives']} positive pair(s), {view['negatives']} known negative pair(s)")
        if full:
            realistic = full["ranks"]["realistic"]
            recalls = "  ".join(f"Recall@{n} {show(realistic.get(f'recall@{n}'))}" for n in protocol["recall_at"])
            lines.append(f"  full matrix ({full['candidates']:,} candidate pairs): AUROC {show(full['auroc'])}  "
                         f"MRR {show(realistic.get('mrr'))}  {recalls}")
        negatives = view.get("known_negatives")
        if negatives:
            realistic = negatives["ranks"]["realistic"]
            lines.append("  known negatives (to be low): " + "  ".join(
                f"Recall@{n} {show(realistic.get(f'recall@{n}'))}" for n in protocol["recall_at"]))
        disease = view.get("disease_specific")
        if disease:
            micro, macro = disease["micro"]["realistic"], disease["macro"]["realistic"]
            hits = "  ".join(f"Hit@{k} {show(macro.get(f'hits@{k}'))}" for k in protocol["hits_at"])
            lines.append(f"  per disease ({disease['diseases']} diseases, macro): MRR {show(macro.get('mrr'))}  {hits}  "
                         f"AUROC {show(disease['auroc'])}  AUPRC {show(disease['auprc'])}  (micro MRR "
                         f"{show(micro.get('mrr'))})")
        classification = view.get("classification")
        if classification:
            lines.append(f"  positives vs known negatives: AUROC {show(classification['auroc'])}  AUPRC "
                         f"{show(classification['auprc'])}  accuracy {show(classification['accuracy'])}  F1 "
                         f"{show(classification['f1'])}")
    txgnn = result.get("txgnn")
    if txgnn:
        fine, centric = txgnn["fine_tuning_test"], txgnn["disease_centric"]
        lines.append(f"TxGNN's protocol (unfiltered, sampled negatives; its code's formulas): micro AUROC "
                     f"{show(fine['micro_auroc'])}  micro AUPRC {show(fine['micro_auprc'])}  macro AUROC "
                     f"{show(fine['macro_auroc'])}  macro AUPRC {show(fine['macro_auprc'])}; disease-centric AUROC "
                     f"{show(centric['auroc'])}  AUPRC {show(centric['auprc'])}")
    entropy = result["frequent_flyers"]["entropy"]
    if entropy:
        lines.append("frequent flyers: " + "  ".join(
            f"Drug-Entropy@{n} {show(values['drug_entropy'])} Disease-Entropy@{n} {show(values['disease_entropy'])}"
            for n, values in entropy.items()))
    for warning in record.get("warnings", []):
        lines.append(f"warning: {warning}")
    return lines
