"""``openbench train``: a PyKEEN baseline on a split."""
from __future__ import annotations

import click

from openbench.cli.common import FiniteFloat, handle_errors, quiet_pykeen

__all__ = ["train"]


@click.command(short_help="Train a PyKEEN model on a split (early stopping on validation).")
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="A split folder or a registry name (as for evaluate).")
@click.option("--model", "model_name", required=True,
              help="TransE-L1, TransE-L2 (TransE with that norm), DistMult, ComplEx, RotatE, RESCAL, SimplE (the "
                   "names evaluate --model offers), or any other PyKEEN model name.")
@click.option("--dim", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--lr", "learning_rate", type=FiniteFloat(min=0, min_open=True), default=0.01, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda.")
@click.option("--no-early-stopping", is_flag=True, help="Train all epochs even with validation triples.")
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Model folder to write (PyKEEN's layout plus openbench-model.json).")
@handle_errors
def train(dataset_path, model_name, dim, epochs, batch_size, learning_rate, seed, device, no_early_stopping,
          output_dir):
    """Train a PyKEEN model on a split's training triples (validation for early stopping)."""
    from openbench.training import train_dataset

    quiet_pykeen()
    description = train_dataset(dataset_path, output_dir, model=model_name, dim=dim, epochs=epochs,
                                batch_size=batch_size, learning_rate=learning_rate, seed=seed, device=device,
                                early_stopping=not no_early_stopping)
    click.echo("\n".join(trained_lines(description)))
    pickle = "" if description.get("scorer") else " --trust-pickle"
    click.echo(f"model in {output_dir}; evaluate with: openbench evaluate --dataset {dataset_path} --model-dir "
               f"{output_dir}{pickle}")


def trained_lines(description: dict) -> list:
    """What training did, in words: epochs (and early stopping, announced with its epoch and
    criterion), and the validation MRR beside the popularity baseline's."""
    lines = []
    stopping = description.get("stopping")
    if stopping and stopping["stopped_early"]:
        lines.append(f"trained {description['model']} for {stopping['epochs_run']} of {description['epochs']} "
                     f"epochs: early stopping ended training (best epoch {stopping['best_epoch']}, validation "
                     f"hits@10 {stopping['best_validation_hits@10']:.4f}; criterion: {stopping['criterion']}; "
                     "--no-early-stopping trains every epoch)")
    else:
        lines.append(f"trained {description['model']} for {description['epochs_run']} epochs"
                     + (" (early stopping on validation did not stop it)" if stopping else ""))
    validation = description.get("validation")
    if validation:
        model_mrr, popularity_mrr = validation["model_mrr"], validation["popularity_mrr"]
        verdict = "above" if model_mrr > popularity_mrr else "not above"
        lines.append(f"validation MRR {model_mrr:.4f} (filtered, realistic rank) against the popularity baseline's "
                     f"{popularity_mrr:.4f}: {verdict} what the training degree alone scores")
    return lines

