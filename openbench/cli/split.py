"""``openbench split rand|time|entity|inductive``: leakage-free splits of a generated graph or a published KG."""
from __future__ import annotations

import click

from openbench.cli.common import WholeHelpGroup, FiniteFloat, handle_errors
from graphgen.graph_files import UNTYPED
from splits import SEEN_RULES

__all__ = ["split", "split_rand", "split_time", "split_entity", "split_inductive"]


@click.group(cls=WholeHelpGroup, short_help="Leakage-free splits: random, time, entity-held-out and inductive.")
def split():
    """Leakage-free train/validation/test splits of a generated graph."""


_SEEN_NODES = click.option(
    "--seen-nodes", type=click.Choice(SEEN_RULES), default="positives", show_default=True,
    help="positives: every node of a validation or test row occurs in a training positive (what embedding models "
         "and the evaluator's default maps know); any: a training negative counts too (OpenBioLink's rule).")


def _eval_negatives(function):
    """--eval-negatives K and --typed, shared by both split commands."""
    function = click.option("--typed", "typed_negatives", is_flag=True,
                            help="With --eval-negatives: draw each negative from the true answer's node type.")(function)
    return click.option("--eval-negatives", type=click.IntRange(min=1), default=None,
                        help="Also write K negative heads and tails per validation and test triple "
                             "(valid_negatives.npz, test_negatives.npz: seeded, never a known answer) for "
                             "evaluate --protocol sampled.")(function)


def _options(*decorators):
    """Apply several click options at once, listed in the order --help shows them."""
    def apply(function):
        for decorator in reversed(decorators):
            function = decorator(function)
        return function
    return apply


EDGES_HELP = ("The graph's positive edges: OpenBioLink's graph_files/edges.csv, or a plain head, relation, tail "
              "file (TSV or CSV, header optional: PyKEEN's and LibKGE's format).")


def _graph_options(required: bool):
    return _options(
        click.option("--edges", "edges_path", required=required, type=click.Path(dir_okay=False, exists=True),
                     help=EDGES_HELP),
        click.option("--tn-edges", "tn_path", default=None, type=click.Path(dir_okay=False, exists=True),
                     help="True-negative edges, in the same format as --edges (optional: without them every "
                          "negative is drawn at random)."),
        click.option("--nodes", "nodes_path", default=None, type=click.Path(dir_okay=False, exists=True),
                     help="The node types, id and type per line (optional: a plain triples file's nodes are "
                          f"then all of type {UNTYPED!r}; OpenBioLink's take their CURIE prefix's type)."))


_GRAPH = _graph_options(required=True)
_COMMON = _options(
    click.option("--sep", default="\t", show_default="TAB", help="Separator of the input files."),
    click.option("--output", "output_dir", default="train_test_data", show_default=True,
                 type=click.Path(file_okay=False), help="Folder for the split files (replaced atomically)."),
    click.option("--seed", type=int, default=42, show_default=True, help="Seed of every random draw."),
    click.option("--neg-ratio", type=FiniteFloat(0, min_open=True), default=1.0, show_default=True,
                 help="Negatives per positive."),
    click.option("--no-neg-train-val", is_flag=True, help="No negatives for training and validation."),
    click.option("--no-neg-test", is_flag=True, help="No negatives for the test set."),
    click.option("--undirected", is_flag=True, help="The graph is undirected: keep reverse edges."),
    _SEEN_NODES, _eval_negatives)


@split.command("rand")
@click.option("--dataset", "dataset", default=None,
              help="A published KG by registry name (hetionet, primekg, drkg, ogbl-biokg, biokg, pharmkg8k, or your "
                   "registry's; 'openbench datasets get NAME' fetches it first) or the graph folder 'datasets get' "
                   "printed, instead of --edges/--tn-edges/--nodes.")
@_graph_options(required=False)
@click.option("--test-frac", type=FiniteFloat(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Test share of all samples.")
@click.option("--val", type=FiniteFloat(0, 1, max_open=True), default=0.05, show_default=True,
              help="Validation share of the rest (0: none).")
@click.option("--crossval", is_flag=True, help="ceil(1/val) cross-validation folds in fold_<i>/.")
@_COMMON
@handle_errors
def split_rand(dataset, edges_path, tn_path, nodes_path, test_frac, val, crossval, sep, output_dir, seed, neg_ratio,
               no_neg_train_val, no_neg_test, undirected, seen_nodes, eval_negatives, typed_negatives):
    """Random split with negatives and leakage removal (OpenBioLink's file layout), of a generated
    graph or of a published KG (--dataset)."""
    from splits.pipeline import split_random

    edges_path, tn_path, nodes_path = _graph_paths(dataset, edges_path, tn_path, nodes_path)

    info = split_random(edges_path, tn_path, nodes_path, output_dir, sep=sep, test_frac=test_frac, val=val,
                        crossval=crossval, seed=seed, directed=not undirected, neg_train_val=not no_neg_train_val,
                        neg_test=not no_neg_test, neg_ratio=neg_ratio, seen_nodes=seen_nodes,
                        **_negative_options(eval_negatives, typed_negatives))
    click.echo(split_summary(output_dir, info))


def split_summary(output_dir, info: dict) -> str:
    """What a random or time split counted, in words: samples (positive edges and the negatives
    beside them), each part's positives and negatives, and what the cleaning removed."""
    counted = info["input"]
    parts = info.get("split") or {}
    samples, positives = counted["after_inconsistent"], counted.get("positives")
    shares = f": {positives} positive edges and {samples - positives} negative ones" if isinstance(positives, int) else ""
    lines = [f"split written to {output_dir}: {samples} samples (a sample is one row of the split files, a positive "
             f"or a negative edge{shares}), before the cleaning below"]
    for name, label in (("train", "training"), ("val", "validation"), ("test", "test")):
        if isinstance(parts.get(name), dict) and "positives" in parts[name]:
            lines.append(f"  {label}: {parts[name]['positives']} positives, {parts[name].get('negatives', 0)} "
                         "negatives")
    for name, label in (("val_cleaning", "validation"), ("test_cleaning", "test")):
        removed = {key: value for key, value in (parts.get(name) or {}).items() if isinstance(value, int) and value}
        if removed:
            listed = ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in sorted(removed.items()))
            lines.append(f"  removed from {label} as leakage or unseen: {listed}")
    return "\n".join(lines)


def _graph_paths(dataset, edges_path, tn_path, nodes_path):
    """(edges, true negatives, nodes): the files given, or those of --dataset's graph folder."""
    given = [p for p in (edges_path, tn_path, nodes_path) if p]
    if dataset is None:
        if edges_path is None:
            raise click.UsageError("name the graph: --edges FILE (OpenBioLink's edges.csv or a plain head, relation, "
                                   "tail file; --tn-edges and --nodes optional), or --dataset NAME")
        return edges_path, tn_path, nodes_path
    if given:
        raise click.UsageError("--dataset names the graph: give it or --edges/--tn-edges/--nodes, not both")
    from openbench.datasets.published.native.graph import GRAPH_FILES
    from openbench.datasets.published.names import graph_folder

    folder = graph_folder(dataset)
    return tuple(str(folder / GRAPH_FILES[kind]) for kind in ("edges", "true_negatives", "nodes"))


def _negative_options(eval_negatives, typed_negatives) -> dict:
    if typed_negatives and not eval_negatives:
        raise click.UsageError("--typed applies to --eval-negatives")
    return {"eval_negatives": eval_negatives or 0, "typed_negatives": typed_negatives}


@split.command("time")
@_GRAPH
@click.option("--tmo-edges", "tmo_edges_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Two snapshots: positive edges of the older (t-1) graph (train on it, test on what is new at t).")
@click.option("--tmo-tn-edges", "tmo_tn_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="True-negative edges of the older (t-1) graph (optional).")
@click.option("--tmo-nodes", "tmo_nodes_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Node types of the older (t-1) graph (optional, as --nodes).")
@click.option("--val", type=FiniteFloat(0, 1, max_open=True), default=0.0, show_default=True,
              help="Two snapshots: the validation share carved from t-1.")
@click.option("--removed-as-negatives", is_flag=True,
              help="Two snapshots: write the edges of t-1 that t no longer holds (retracted facts) as test "
                   "negatives (source REMOVED), which classification and the repurposing task read as known negatives.")
@click.option("--cutoff", default=None,
              help="One dated graph (--edges a plain triples file with a date per edge): train on the edges dated on "
                   "or before this day (YYYY-MM-DD; the file's dates may be days, months or years, a month or year standing "
                   "for its first day) and the undated ones, test on those after.")
@click.option("--valid-cutoff", default=None,
              help="With --cutoff: validation holds the edges dated after this date and on or before --cutoff.")
@click.option("--date-column", default="date", show_default=True,
              help="With --cutoff: the column of --edges holding each edge's date (a headerless file: the 4th).")
@_COMMON
@handle_errors
def split_time(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path, val, removed_as_negatives,
               cutoff, valid_cutoff, date_column, sep, output_dir, seed, neg_ratio, no_neg_train_val, no_neg_test,
               undirected, seen_nodes, eval_negatives, typed_negatives):
    """Time split: two snapshots (train on t-1, test on the edges new at t; --tmo-edges), or one graph
    whose edges carry dates (train up to a cut-off, test after it; --cutoff)."""
    common = dict(seed=seed, directed=not undirected, neg_train_val=not no_neg_train_val, neg_test=not no_neg_test,
                  neg_ratio=neg_ratio, seen_nodes=seen_nodes, **_negative_options(eval_negatives, typed_negatives))
    if (tmo_edges_path is None) == (cutoff is None):
        raise click.UsageError("give two snapshots (--tmo-edges, the t-1 graph) or one dated graph and a cut-off "
                               "(--cutoff), not both")
    if cutoff is not None:
        snapshot_only = [flag for flag, given in (("--tmo-tn-edges", tmo_tn_path), ("--tmo-nodes", tmo_nodes_path),
                                                  ("--val", val), ("--removed-as-negatives", removed_as_negatives))
                         if given]
        if snapshot_only:
            raise click.UsageError(f"{', '.join(snapshot_only)} go with two snapshots (--tmo-edges); a dated graph "
                                   "carves validation with --valid-cutoff")
        from splits.pipeline import split_dated

        info = split_dated(edges_path, tn_path, nodes_path, output_dir, cutoff=cutoff, valid_cutoff=valid_cutoff,
                           date_column=date_column, **common)
        dated = info["dated"]
        click.echo(f"split written to {output_dir}: cut-off {dated['cutoff']}; {info['split']['test']['positives']} test "
                   f"positives dated after it; {dated['undated_edges_in_training']} undated edge(s) in training; "
                   f"{dated['entities_first_seen_after_training']} entities first seen after training")
        return
    if valid_cutoff is not None:
        raise click.UsageError("--valid-cutoff goes with --cutoff (a dated graph)")
    from splits.pipeline import split_time as run_time_split

    info = run_time_split(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path, output_dir,
                          sep=sep, val=val, removed_as_negatives=removed_as_negatives, **common)
    click.echo(f"split written to {output_dir} ({info['input']['new_positives']} new positives)")


def _names(text):
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


@split.command("entity")
@click.option("--dataset", "dataset", default=None,
              help="A published KG by registry name (primekg, hetionet, ...) or its graph folder, instead of "
                   "--edges/--tn-edges/--nodes.")
@_graph_options(required=False)
@click.option("--node-type", default=None, help="Hold out a --fraction of this node type's entities (those with an "
                                                 "edge of the held-out relations), chosen by --seed.")
@click.option("--fraction", type=FiniteFloat(0, 1, min_open=True, max_open=True), default=None,
              help="With --node-type: the share of its entities held out for test.")
@click.option("--entities", "entities_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Hold out these entities for test (one id per line).")
@click.option("--subtree", "roots_text", default=None,
              help="Hold out these roots and every entity below them in --hierarchy-relation (comma-separated ids).")
@click.option("--hierarchy-relation", default=None,
              help="With --subtree: the relation linking child and parent (OpenBioLink: IS_A; PrimeKG: "
                   "disease_disease).")
@click.option("--hierarchy-direction", type=click.Choice(["child-parent", "parent-child"]), default="child-parent",
              show_default=True, help="How --hierarchy-relation's edges point (PrimeKG's disease_disease as openbench "
                                      "converts it: parent-child).")
@click.option("--val-fraction", type=FiniteFloat(0, 1, max_open=True), default=0.0, show_default=True,
              help="Hold out this share of the remaining entities of the same node type(s) for validation.")
@click.option("--val-entities", "val_entities_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Hold out these entities for validation (one id per line).")
@click.option("--relations", "relations_text", default=None,
              help="The relations whose edges of a held-out entity go to validation/test (comma-separated, e.g. "
                   "indication,contraindication,off-label use) [default: every relation: fully cold].")
@click.option("--isolate", is_flag=True, help="Also drop the held-out entities' other edges from training.")
@click.option("--neighbourhood", type=click.IntRange(min=0), default=0, show_default=True,
              help="Also drop training edges of the held-out relations within K hops of a held-out entity.")
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the input files.")
@click.option("--output", "output_dir", default="train_test_data", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the split files (replaced atomically).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of every random draw.")
@click.option("--neg-ratio", type=FiniteFloat(0, min_open=True), default=1.0, show_default=True,
              help="Negatives per positive.")
@click.option("--no-neg-train-val", is_flag=True, help="No negatives for training and validation.")
@click.option("--no-neg-test", is_flag=True, help="No negatives for the test set.")
@handle_errors
def split_entity(dataset, edges_path, tn_path, nodes_path, node_type, fraction, entities_path, roots_text,
                 hierarchy_relation, hierarchy_direction, val_fraction, val_entities_path, relations_text, isolate,
                 neighbourhood, sep, output_dir, seed, neg_ratio, no_neg_train_val, no_neg_test):
    """Entity-held-out (zero-shot) split: the edges of held-out entities under the held-out relations
    go to validation/test, leakage-free (new drugs, new diseases; TxGNN's and TDC's cold splits)."""
    from splits.entity_split import Selection
    from splits.pipeline import read_entity_file, split_entity as run_entity_split

    edges_path, tn_path, nodes_path = _graph_paths(dataset, edges_path, tn_path, nodes_path)
    selection = Selection(node_type=node_type, fraction=fraction,
                          entities=read_entity_file(entities_path) if entities_path else None,
                          roots=_names(roots_text), hierarchy_relation=hierarchy_relation,
                          hierarchy_direction=hierarchy_direction)
    info = run_entity_split(edges_path, tn_path, nodes_path, output_dir, sep=sep, selection=selection,
                            relations=_names(relations_text), val_fraction=val_fraction,
                            val_entities=read_entity_file(val_entities_path) if val_entities_path else None,
                            isolate=isolate, neighbourhood=neighbourhood, seed=seed,
                            neg_train_val=not no_neg_train_val, neg_test=not no_neg_test, neg_ratio=neg_ratio)
    counts, heldout = info["split"], info["heldout"]
    click.echo(f"split written to {output_dir}: {heldout['test']} test and {heldout['valid']} validation entities "
               f"held out; positives train {counts['train']['positives']}, validation "
               f"{counts.get('val', {}).get('positives', 0)}, test {counts['test']['positives']}")


@split.command("inductive")
@click.option("--dataset", "dataset", default=None,
              help="A published KG by registry name (primekg, hetionet, ...) or its graph folder, instead of --edges.")
@click.option("--edges", "edges_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help=EDGES_HELP)
@click.option("--inference-fraction", type=FiniteFloat(0, 1, min_open=True, max_open=True), default=0.2,
              show_default=True, help="Share of the entities that form the inference graph (grown as connected "
                                      "regions).")
@click.option("--val-fraction", type=FiniteFloat(0, 1, max_open=True), default=0.1, show_default=True,
              help="Share of the inference graph's edges drawn for validation.")
@click.option("--test-fraction", type=FiniteFloat(0, 1, min_open=True, max_open=True), default=0.1,
              show_default=True, help="Share of the inference graph's edges drawn for test.")
@click.option("--undirected", is_flag=True, help="Relations are symmetric: a reverse edge is no leak.")
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the input file.")
@click.option("--output", "output_dir", default="inductive_split", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the split files (replaced atomically).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of every random draw.")
@handle_errors
def split_inductive(dataset, edges_path, inference_fraction, val_fraction, test_fraction, undirected, sep,
                    output_dir, seed):
    """Inductive split in ILPC 2022's layout: a training graph, a disjoint inference graph of new
    entities, validation and test triples drawn from it (PyKEEN's inductive datasets read the folder)."""
    from splits.pipeline import split_inductive as run_inductive_split

    if (dataset is None) == (edges_path is None):
        raise click.UsageError("name the graph with --dataset or --edges (one of them)")
    if dataset is not None:
        edges_path, _, _ = _graph_paths(dataset, None, None, None)
    info = run_inductive_split(edges_path, output_dir, sep=sep, inference_fraction=inference_fraction,
                               val_fraction=val_fraction, test_fraction=test_fraction, seed=seed,
                               directed=not undirected)
    entities, triples = info["entities"], info["triples"]
    click.echo(f"split written to {output_dir}: training graph {entities['train']} entities, {triples['train']} "
               f"triples; inference graph {entities['inference']} entities, {triples['inference']} triples; "
               f"validation {triples['valid']}, test {triples['test']}")
