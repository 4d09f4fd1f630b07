"""``openbench leaderboard``: the local store, its renderings, and the served board."""
from __future__ import annotations

import click

from openbench.cli.common import (TaskChoice, WholeHelpGroup, handle_errors, model_file_options,
                                  score_table_options, split_list)
from openbench.leaderboard.render import TABLE_FORMATS
from openbench.leaderboard.store import MODEL_TYPES, RANK_TYPES, SIDES
from openbench.task_registry import DEFAULT_TASK

__all__ = ["leaderboard", "leaderboard_submit", "leaderboard_submit_predictions", "leaderboard_serve", "leaderboard_reveal", "leaderboard_token", "leaderboard_show", "leaderboard_export"]


@click.group(cls=WholeHelpGroup, short_help="Leaderboards of validated result records: local, exported or served.")
def leaderboard():
    """A local leaderboard of validated result records (SQLite)."""


_PUBLISHED_OPTION = click.option(
    "--published", is_flag=True,
    help="Also show OpenBioLink's published HQ_DIR results (not reproduced here; shown without it only when --dataset "
         "names their dataset).")
_DB_OPTION = click.option("--db", type=click.Path(dir_okay=False), default=None,
                          help="The leaderboard database [default: the user data directory's leaderboard.sqlite].")


@leaderboard.command("submit")
@click.argument("result_path", type=click.Path(dir_okay=False, exists=True))
@click.option("--name", required=True, help="The name shown on the leaderboard.")
@click.option("--model-type", type=click.Choice(MODEL_TYPES), default="other", show_default=True)
@click.option("--paper", default=None, help="URL of the paper.")
@click.option("--code", default=None, help="URL of the code.")
@click.option("--notes", default=None, help="Free text.")
@click.option("--server", default=None, help="A served board's URL (openbench leaderboard serve) instead of --db.")
@click.option("--token", default=None, envvar="OPENBENCH_TOKEN", help="Your team's token for --server "
                                                                      "[env: OPENBENCH_TOKEN].")
@click.option("--ranks", "ranks_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The record's per-query ranks (evaluate --ranks-output): the row then shows its 95 % interval "
                   "(a self-reported row gets no paired verdict against another; give the model to have one).")
@click.option("--dataset", "dataset_path", default=None,
              help="With the model's files: the board's copy of the record's dataset (a split folder or a registry "
                   "name), on which the board re-evaluates the model and stores its own record and ranks "
                   "(verified: reproduced).")
@model_file_options
@score_table_options
@click.option("--model-dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="A model folder to re-evaluate (arrays, PyG, PyKEEN, DGL-KE or LibKGE, as evaluate reads it).")
@_DB_OPTION
@handle_errors
def leaderboard_submit(result_path, name, model_type, paper, code, notes, server, token, ranks_path, dataset_path,
                       entity_embeddings, relation_embeddings, model_name, complex_layout, trust_pickle, dglke_data,
                       libkge_data, scores_path, score_column, id_columns, ranked_list_path, names_path,
                       require_complete, model_dir, db):
    """Validate RESULT_PATH (an openbench result JSON) and add it to the leaderboard (local, or --server).

    Given the model too (--model-dir, or --model with embedding files) and --dataset, the board
    re-evaluates it under the record's protocol, refuses it unless it gives the record, and stores
    the board's own record and ranks with a re-evaluation certificate: only such rows (and rows a
    served board scored) are compared with each other."""
    model_given = any((entity_embeddings, relation_embeddings, model_name, model_dir, scores_path, ranked_list_path))
    if server and (ranks_path or model_given):
        raise click.UsageError("--ranks and the model's files go with a local board (--db); a served board keeps the "
                               "ranks of the rows it scores itself (submit-predictions)")
    if dataset_path and not model_given:
        raise click.UsageError("--dataset is the board's copy of the dataset to re-evaluate the model on: give the "
                               "model too (--model-dir, or --model with --entity-embeddings/--relation-embeddings)")
    if server:
        from openbench._io.inputs import read_bytes
        from openbench.leaderboard.client import post

        answer = post(server, "/api/submissions", read_bytes(result_path), "application/json", token,
                      dict(name=name, model_type=model_type, paper=paper, code=code, notes=notes))
        click.echo(f"added #{answer['id']} {name!r} to {server} (team {answer['team']}, self-reported)")
        return
    from openbench.leaderboard.store import submit_file

    spec = None
    if model_given:
        from openbench.models.sources import ModelSpec

        spec = ModelSpec(entity_embeddings, relation_embeddings, model_name, complex_layout, model_dir, trust_pickle,
                         dglke_data, False, libkge_data, scores=scores_path, score_column=score_column,
                         id_columns=split_list(id_columns) if id_columns else None, ranked_list=ranked_list_path,
                         names=names_path, require_complete=require_complete)
    path, row_id = submit_file(result_path, db, ranks_path, model=spec, dataset=dataset_path, name=name,
                               model_type=model_type, paper=paper, code=code, notes=notes)
    how = "reproduced by the board: its own record and ranks, with a re-evaluation certificate" if spec else \
        "self-reported"
    click.echo(f"added #{row_id} {name!r} to {path} ({how})")


@leaderboard.command("submit-predictions")
@click.argument("predictions_path", type=click.Path(dir_okay=False, exists=True))
@click.option("--server", required=True, help="The served board's URL.")
@click.option("--benchmark", required=True, help="The hosted benchmark's name (GET /api/benchmarks lists them).")
@click.option("--name", required=True, help="The name shown on the leaderboard.")
@click.option("--model-type", type=click.Choice(MODEL_TYPES), default="other", show_default=True)
@click.option("--paper", default=None, help="URL of the paper.")
@click.option("--code", default=None, help="URL of the code.")
@click.option("--token", default=None, envvar="OPENBENCH_TOKEN", help="Your team's token [env: OPENBENCH_TOKEN].")
@handle_errors
def leaderboard_submit_predictions(predictions_path, server, benchmark, name, model_type, paper, code, token):
    """Send top-k predictions (an .npz, rows in the order of GET /api/benchmarks/NAME/queries) to be
    scored by the server against its hidden test answers."""
    from openbench._io.inputs import read_bytes
    from openbench.leaderboard.client import post

    answer = post(server, f"/api/benchmarks/{benchmark}/predictions", read_bytes(predictions_path),
                  "application/octet-stream", token, dict(name=name, model_type=model_type, paper=paper, code=code))
    metrics = answer["metrics"]
    click.echo(f"added #{answer['id']} {name!r} to {server} (team {answer['team']}, scored by the server): "
               f"MRR {metrics['mrr']:.4f}, hits@10 {metrics.get('hits@10', 0):.4f}")


@leaderboard.command("serve")
@_DB_OPTION
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--benchmark", "benchmarks", multiple=True,
              help="NAME=SPLIT_DIR: host a benchmark scored against that split's hidden test answers (repeatable).")
@click.option("--max-body-mb", type=click.FloatRange(min=0.001), default=16.0, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0.01), default=20.0, show_default=True,
              help="Requests per second per token, on average.")
@click.option("--burst", type=click.IntRange(min=1), default=60, show_default=True,
              help="Requests per token at once.")
@click.option("--daily-limit", type=click.IntRange(min=0), default=5, show_default=True,
              help="Scored uploads per team, benchmark and UTC day (every upload counts, refused or not); 0: no "
                   "limit, which makes test-dev a scoring oracle.")
@_PUBLISHED_OPTION
@handle_errors
def leaderboard_serve(db, host, port, benchmarks, max_body_mb, rate, burst, daily_limit, published):
    """Serve the board over HTTP: the page, the rows as JSON, token-authenticated submissions and
    server-side scoring of hosted benchmarks (test-dev shown at once, test-challenge after
    `leaderboard reveal`)."""
    from openbench.leaderboard.server import serve
    from openbench.leaderboard.store import default_path

    hosted = {}
    for text in benchmarks:
        name, _, folder = text.partition("=")
        if not name or not folder:
            raise click.BadParameter(f"expected NAME=SPLIT_DIR, got {text!r}", param_hint="--benchmark")
        hosted[name] = folder
    database = db or str(default_path())
    serve(database, host, port, hosted, int(max_body_mb * 1024 * 1024), rate, burst, daily_limit or None,
          published=published or None,
          announce=lambda url: click.echo(f"serving {database} on {url}", err=True))


@leaderboard.command("reveal")
@click.option("--benchmark", required=True, help="The hosted benchmark whose test-challenge scores are shown.")
@_DB_OPTION
@handle_errors
def leaderboard_reveal(benchmark, db):
    """Show the test-challenge scores of BENCHMARK (stored hidden until now, shown at once from now on)."""
    shown = _on_board(db, "reveal", benchmark)
    click.echo(f"revealed {shown} test-challenge row(s) of {benchmark!r}")


@leaderboard.group("token")
def leaderboard_token():
    """Team tokens of a served board (only salted hashes are stored)."""


@leaderboard_token.command("create")
@_DB_OPTION
@click.option("--name", "team", required=True, help="The team the token submits for.")
@handle_errors
def leaderboard_token_create(db, team):
    """Print a new token for TEAM once; keep it secret."""
    click.echo(_on_board(db, "create_token", team))


@leaderboard_token.command("revoke")
@_DB_OPTION
@click.option("--name", "team", required=True, help="The team whose tokens stop working.")
@handle_errors
def leaderboard_token_revoke(db, team):
    """Revoke every token of TEAM."""
    click.echo(f"revoked {_on_board(db, 'revoke_tokens', team)} token(s) of {team!r}")


def _on_board(db, method: str, *args):
    """``open_leaderboard(db).<method>(*args)``, the store closed afterwards."""
    from openbench.leaderboard.store import open_leaderboard

    board = open_leaderboard(db)
    try:
        return getattr(board, method)(*args)
    finally:
        board.close()


@leaderboard.command("show")
@click.option("--dataset", default=None, help="A registry name or a fingerprint prefix (6+ characters).")
@click.option("--sort", default=None, help="mrr, hits@1, hits@10, mr, ...; classification: auroc, auprc, accuracy, "
                                             "f1; repurposing: auroc, recall@N, disease_mrr, disease_hits@K, "
                                             "disease_auroc, disease_auprc [default: mrr, or auroc].")
@click.option("--side", type=click.Choice(SIDES), default="both", show_default=True)
@click.option("--rank-type", type=click.Choice(RANK_TYPES), default="realistic", show_default=True)
@click.option("--task", type=TaskChoice(), default=DEFAULT_TASK, show_default=True,
              help="Which records: tasks are never ranked together.")
@click.option("--scoped", is_flag=True, help="Show the records of scoped protocols (--relations, --sides, "
                                             "--entities), ranked within each scope, instead of the full ones.")
@click.option("--format", "fmt", type=click.Choice(TABLE_FORMATS), default="table", show_default=True)
@_PUBLISHED_OPTION
@_DB_OPTION
@handle_errors
def leaderboard_show(dataset, sort, side, rank_type, task, scoped, fmt, published, db):
    """One row per model and protocol, mean ± std over seeds (--published: OpenBioLink's published
    results beside them)."""
    from openbench.leaderboard.render import render
    from openbench.leaderboard.store import read_rows

    click.echo(render(read_rows(db, dataset=dataset, side=side, rank_type=rank_type, sort=sort, task=task,
                                scoped=scoped, include_published=published or None), fmt, sort), nl=False)


@leaderboard.command("export")
@click.option("--format", "fmt", type=click.Choice(["html"]), default="html", show_default=True)
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False))
@click.option("--dataset", default=None, help="A registry name or a fingerprint prefix.")
@_PUBLISHED_OPTION
@_DB_OPTION
@handle_errors
def leaderboard_export(fmt, output_dir, dataset, published, db):
    """A static page (sortable table, plot of MRR and hits@10) in OUTPUT/index.html."""
    from openbench.leaderboard.render import export_page

    click.echo(str(export_page(db, output_dir, dataset=dataset, published=published or None)))

