"""A malformed-input corpus run over every subcommand.

Each case damages one input file of an otherwise valid command line (truncation at every layer,
wrong encodings, wrong widths and types, empty files, enormous lines, hostile JSON and arrays) and
asserts: exit status 1 or 2, one ``error:`` line on stderr naming the file, no traceback, no bare
``Aborted!``, no internal error, and every byte of the command's output location as before. A few
damages must be *accepted* (a UTF-8 byte-order mark, CRLF line endings): those cases assert a
clean success instead. The corpus is small files only, so it runs in the normal suite.
"""
from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
from click.testing import CliRunner

from graphgen.pipeline import SAMPLE_DIR
from openbench.cli import main
from tests.helpers import snapshot

pytestmark = pytest.mark.slow  # minutes in all (spawned processes, training, a corpus): not in the fast loop

# ------------------------------------------------------------------------------------------
# damages: bytes -> bytes


def _lines(data: bytes) -> List[bytes]:
    return data.splitlines(keepends=True)


def empty(data: bytes) -> bytes:
    return b""


def not_utf8(data: bytes) -> bytes:
    lines = _lines(data)
    index = len(lines) // 2
    lines[index] = lines[index][:1] + b"\xff\xfe" + lines[index][1:]
    return b"".join(lines)


def truncated_line(data: bytes) -> bytes:
    """The last data line cut right after its first separator: too few columns."""
    lines = [line for line in _lines(data) if line.strip()]
    last = lines[-1]
    for separator in (b"\t", b" ", b","):
        if separator in last:
            return b"".join(lines[:-1]) + last[:last.index(separator) + 1] + b"\n"
    return b"".join(lines[:-1]) + last[:1]


def extra_column(data: bytes) -> bytes:
    lines = _lines(data)
    index = len(lines) - 1
    lines[index] = lines[index].rstrip(b"\r\n") + b"\textra\tcolumns\n"
    return b"".join(lines)


def binary_garbage(data: bytes) -> bytes:
    return bytes(np.random.default_rng(7).integers(0, 256, 600, dtype=np.uint8))


def nul_bytes(data: bytes) -> bytes:
    return data[:len(data) // 2] + b"\x00" * 50 + data[len(data) // 2:]


def enormous_line(data: bytes) -> bytes:
    return data + b"X" * 2_000_000 + b"\n"


def cr_only(data: bytes) -> bytes:
    """Every line ending a lone carriage return (classic Mac OS): issue 37's one-edge split."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def gzip_long_line(data: bytes) -> bytes:
    """A gzip whose content ends with a 17 MiB line (past the reading layer's 16 MiB bound), a
    few kilobytes compressed."""
    return gzip.compress(gzip.decompress(data) + b"X" * (17 << 20) + b"\n", compresslevel=9, mtime=0)


def past_the_text(data: bytes) -> bytes:
    """A BRAT span ending far past the end of its document (issue 37)."""
    return data.replace(b"14 17", b"14 7000", 1)


def obo_cycle(data: bytes) -> bytes:
    """An is_a cycle: the root made a child of one of its descendants."""
    return data.replace(b"id: HP:0000001\n", b"id: HP:0000001\nis_a: HP:0000003\n", 1)


def with_bom(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def with_crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def gzip_truncated(data: bytes) -> bytes:
    packed = gzip.compress(gzip.decompress(data) * 40, mtime=0)
    return packed[:len(packed) // 2]


def gzip_foreign(data: bytes) -> bytes:
    return b"this is not gzip data\n" * 20


def gzip_of(damage: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def damaged(data: bytes) -> bytes:
        return gzip.compress(damage(gzip.decompress(data)), mtime=0)

    damaged.__name__ = f"gzip({damage.__name__})"
    return damaged


def zip_truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def json_deep(data: bytes) -> bytes:
    return b"[" * 100_000 + b"]" * 100_000


def json_truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def json_not_object(data: bytes) -> bytes:
    return b"[1, 2, 3]"


def npy_truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def npy_pickled(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def npy_is_npz(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    np.savez(buffer, x=np.zeros(3))
    return buffer.getvalue()


def npy_wrong_shape(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.zeros((2, 3), dtype=np.float32))
    return buffer.getvalue()


def npz_wrong_key(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    np.savez(buffer, predictions=np.zeros((2, 10), dtype=np.int64))
    return buffer.getvalue()


TEXT_ERRORS = [empty, not_utf8, truncated_line, extra_column, binary_garbage, nul_bytes, cr_only]
TEXT_ACCEPTED = [with_bom, with_crlf]
JSON_ERRORS = [empty, not_utf8, json_deep, json_truncated, binary_garbage]
NPY_ERRORS = [empty, npy_truncated, binary_garbage, npy_pickled, npy_is_npz, npy_wrong_shape]
NPZ_ERRORS = [empty, npy_truncated, binary_garbage, npz_wrong_key, npy_pickled]
GZ_ERRORS = [gzip_truncated, gzip_foreign, gzip_of(not_utf8), gzip_of(truncated_line), gzip_of(binary_garbage),
             gzip_of(cr_only), gzip_long_line]


# ------------------------------------------------------------------------------------------
# valid inputs, built once


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Dict[str, Path]:
    """Valid inputs of every command: a graph, a split, embeddings, a KGID copy, model outputs,
    text-mining files. Each case copies what it damages."""
    root = tmp_path_factory.mktemp("world")
    runner = CliRunner()

    def run(*args: str) -> None:
        done = runner.invoke(main, list(args), catch_exceptions=False)
        assert done.exit_code == 0, done.output

    run("generate", "--sample", "--qual", "nq", "--output", str(root / "graph"), "--no-progress")
    files = root / "graph" / "graph_files"
    run("split", "rand", "--edges", str(files / "edges.csv"), "--tn-edges", str(files / "TN_edges.csv"),
        "--nodes", str(files / "ALL_nodes.csv"), "--output", str(root / "split"), "--test-frac", "0.1")
    run("export-kgid", "--dataset", str(root / "split"), "--output", str(root / "kgid"))
    older = root / "graph_tmo"  # the graph at t-1: every 8th edge and every 5th true negative not there yet
    older.mkdir()
    for name, step in (("edges.csv", 8), ("TN_edges.csv", 5)):
        lines = (files / name).read_text().splitlines(keepends=True)
        (older / name).write_text("".join(line for i, line in enumerate(lines) if i % step))
    shutil.copy(files / "ALL_nodes.csv", older / "ALL_nodes.csv")
    from openbench.datasets.loader import load_dataset

    dataset = load_dataset(root / "split")
    rng = np.random.default_rng(0)
    np.save(root / "entities.npy", rng.normal(size=(dataset.num_entities, 8)).astype(np.float32))
    np.save(root / "relations.npy", rng.normal(size=(dataset.num_relations, 8)).astype(np.float32))
    (root / "entity_map.tsv").write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(dataset.entity_labels)))
    labels, relations = dataset.entity_labels, dataset.relation_labels
    lines = []
    for h, r, t in dataset.triples["test"][:5].tolist():
        lines += [f"{labels[h]} {relations[r]} {labels[t]}", f"Heads: {labels[h]}\t0.9\t{labels[t]}\t0.5",
                  f"Tails: {labels[t]}\t0.8"]
    (root / "predictions.txt").write_text("\n".join(lines) + "\n")
    kgid = load_dataset(root / "kgid")
    tasks = kgid.triples["test"].shape[0]
    np.savez(root / "submission.npz", pred_top10=np.tile(np.arange(10, dtype=np.int64), (2 * tasks, 1)))
    run("evaluate", "--dataset", str(root / "split"), "--model", "DistMult", "--entity-embeddings",
        str(root / "entities.npy"), "--relation-embeddings", str(root / "relations.npy"), "--no-progress",
        "--output", str(root / "result.json"))
    metaeval = root / "metaeval"
    for side in ("pred", "truth"):
        (metaeval / side).mkdir(parents=True)
        (metaeval / side / "title.tsv").write_text("p1\tA title\np2\tAnother\n")
    brat = root / "brat"
    for side in ("gold", "pred"):
        (brat / side).mkdir(parents=True)
        (brat / side / "doc.txt").write_text("Aspirin binds COX.\n")
        (brat / side / "doc.ann").write_text("T1\tDRUG 0 7\tAspirin\nT2\tGENE 14 17\tCOX\nR1\tBINDS Arg1:T1 Arg2:T2\n")
    (root / "cases.json").write_text(json.dumps([[["HP:0000002"], ["OMIM:100001"]]]))
    shutil.copy(SAMPLE_DIR / "phenotype.hpoa", root / "phenotype.hpoa")
    shutil.copy(SAMPLE_DIR / "hp.obo", root / "hp.obo")
    run("text", "rank-diseases", "--test-set", str(root / "cases.json"), "--annotations", str(root / "phenotype.hpoa"),
        "--ontology", str(root / "hp.obo"), "--cache-root", str(root / "ranking"), "--method", "set_jaccard",
        "--no-progress")
    from openbench.datasets.published.native import convert
    from tests.helpers import PROJECT_ROOT

    native = root / "kg_native"  # a published KG converted as `datasets get` converts it: DRKG's real rows
    native.mkdir()
    drkg_rows = [(PROJECT_ROOT / "tests" / "data" / "kgs" / "drkg" / name).read_text() for name in
                 ("coronavirus-related-host-genes.tsv", "covid19-host-genes.head171.tsv")]
    (native / "drkg.tsv").write_text("".join(drkg_rows))
    convert("drkg", native, root / "kg", {"name": "drkg-excerpt"}, {})
    return {"root": root, "graph": files, "split": root / "split", "kgid": root / "kgid"}


# ------------------------------------------------------------------------------------------
# the cases


@dataclass
class Case:
    command: str  # a name for the report
    target: str  # the damaged file, relative to the case's copy of the world
    damage: Callable[[bytes], bytes]
    args: Callable[[Path, Path], List[str]]  # (world copy, output location) -> arguments
    output: Optional[str] = None  # the output location, relative to the copy (must stay byte-identical)
    accepted: bool = False  # the damage must be read correctly instead

    @property
    def id(self) -> str:
        return f"{self.command}-{self.target}-{self.damage.__name__}"


def _split_args(world: Path, out: Path) -> List[str]:
    graph = world / "graph" / "graph_files"
    return ["split", "rand", "--edges", str(graph / "edges.csv"), "--tn-edges", str(graph / "TN_edges.csv"),
            "--nodes", str(graph / "ALL_nodes.csv"), "--output", str(out), "--test-frac", "0.1"]


def _time_split_args(world: Path, out: Path) -> List[str]:
    now, before = world / "graph" / "graph_files", world / "graph_tmo"
    return ["split", "time", "--edges", str(now / "edges.csv"), "--tn-edges", str(now / "TN_edges.csv"),
            "--nodes", str(now / "ALL_nodes.csv"), "--tmo-edges", str(before / "edges.csv"), "--tmo-tn-edges",
            str(before / "TN_edges.csv"), "--tmo-nodes", str(before / "ALL_nodes.csv"), "--output", str(out)]


def _evaluate_args(world: Path, out: Path, dataset: str = "split") -> List[str]:
    return ["evaluate", "--dataset", str(world / dataset), "--model", "DistMult", "--entity-embeddings",
            str(world / "entities.npy"), "--relation-embeddings", str(world / "relations.npy"), "--no-progress",
            "--output", str(out)]


def _generate_args(world: Path, out: Path) -> List[str]:
    return ["generate", "--sources-dir", str(world / "sources"), "--no-download", "--qual", "nq", "--output",
            str(out), "--no-progress"]


def _cases() -> List[Case]:
    cases: List[Case] = []

    def add(command, target, damages, args, output=None, accepted=False):
        cases.extend(Case(command, target, damage, args, output, accepted) for damage in damages)

    # split rand: the three graph files
    for name in ("edges.csv", "TN_edges.csv", "ALL_nodes.csv"):
        errors = [d for d in TEXT_ERRORS if not (name == "TN_edges.csv" and d is empty)]
        add("split", f"graph/graph_files/{name}", errors, _split_args, "previous_split")
        add("split", f"graph/graph_files/{name}", TEXT_ACCEPTED, _split_args, "previous_split", accepted=True)
    add("split", "graph/graph_files/edges.csv", [lambda d: d.replace(b"GENE_GENE", b"GENE_FOO", 1)], _split_args,
        "previous_split")
    # split time: the graph at t-1 (the graph at t is read as for split rand)
    for name in ("edges.csv", "TN_edges.csv", "ALL_nodes.csv"):
        errors = [d for d in TEXT_ERRORS if not (name != "edges.csv" and d is empty)]
        add("split time", f"graph_tmo/{name}", errors, _time_split_args, "previous_split")
        add("split time", f"graph_tmo/{name}", [with_crlf], _time_split_args, "previous_split", accepted=True)
    # evaluate: the split files, the embeddings, the maps, predictions, submissions
    for name in ("train_sample.csv", "test_sample.csv"):
        add("evaluate", f"split/{name}", TEXT_ERRORS, _evaluate_args, "previous_result.json")
        add("evaluate", f"split/{name}", TEXT_ACCEPTED, _evaluate_args, "previous_result.json", accepted=True)
    add("evaluate", "split/test_sample.csv", [lambda d: d.replace(b"\t1\t", b"\tyes\t", 1)], _evaluate_args,
        "previous_result.json")
    for name in ("entities.npy", "relations.npy"):
        add("evaluate", name, NPY_ERRORS, _evaluate_args, "previous_result.json")
    add("evaluate", "entity_map.tsv", TEXT_ERRORS + [lambda d: d.replace(b"0\t", b"x\t", 1)],
        lambda w, o: _evaluate_args(w, o) + ["--entity-map", str(w / "entity_map.tsv")], "previous_result.json")
    for name in ("entities.tsv", "train.tsv", "test.tsv"):
        add("evaluate", f"kgid/{name}", [d for d in TEXT_ERRORS if not (name != "entities.tsv" and d is empty)]
            + [lambda d: d.replace(b"0", b"-7", 1)],
            lambda w, o: _evaluate_args(w, o, "kgid"), "previous_result.json")
    add("evaluate", "predictions.txt", [empty, not_utf8, truncated_line, binary_garbage, nul_bytes,
                                        lambda d: d.replace(b"0.9", b"nan", 1), lambda d: d.replace(b"0.9", b"x", 1)],
        lambda w, o: ["evaluate", "--dataset", str(w / "split"), "--predictions", str(w / "predictions.txt"),
                      "--output", str(o)], "previous_result.json")
    add("evaluate", "submission.npz", NPZ_ERRORS,
        lambda w, o: ["evaluate", "--dataset", str(w / "kgid"), "--submission", str(w / "submission.npz"),
                      "--output", str(o)], "previous_result.json")
    # train and export-kgid read a dataset (train fails before PyKEEN is asked for anything)
    add("export-kgid", "split/train_sample.csv", TEXT_ERRORS,
        lambda w, o: ["export-kgid", "--dataset", str(w / "split"), "--output", str(o)], "previous_kgid")
    # split rand --dataset: a converted published KG's graph folder
    kg_split = lambda w, o: ["split", "rand", "--dataset", str(w / "kg" / "graph"), "--output", str(o),  # noqa: E731
                             "--test-frac", "0.2"]
    for name in ("edges.csv", "nodes.csv"):
        add("split --dataset", f"kg/graph/{name}", [empty, not_utf8, truncated_line, binary_garbage, nul_bytes, cr_only],
            kg_split, "previous_split")
        add("split --dataset", f"kg/graph/{name}", TEXT_ACCEPTED, kg_split, "previous_split", accepted=True)
    add("split --dataset", "kg/graph/graph_info.json", JSON_ERRORS + [json_not_object], kg_split, "previous_split")
    add("train", "split/train_sample.csv", [not_utf8, truncated_line, binary_garbage],
        lambda w, o: ["train", "--dataset", str(w / "split"), "--model", "DistMult", "--epochs", "1",
                      "--output", str(o)], "previous_model")
    # export: a graph folder
    for name in ("edges.csv", "nodes.csv"):
        add("export", f"graph/graph_files/{name}", [not_utf8, truncated_line, binary_garbage, nul_bytes],
            lambda w, o: ["export", "--graph", str(w / "graph" / "graph_files"), "--format", "PARQUET",
                          "--output", str(o)], "previous_export")
    add("export", "graph/graph_files/graph_props.json", JSON_ERRORS[1:],
        lambda w, o: ["export", "--graph", str(w / "graph" / "graph_files"), "--format", "PARQUET",
                      "--output", str(o)], "previous_export")
    # generate: source files in their formats (gzip, zip, plain, OBO, SQL dump)
    for name in ("9606.protein.links.v11.0.txt.gz", "curated_gene_disease_associations.tsv.gz", "goa_human.gaf.gz"):
        add("generate", f"sources/{name}", GZ_ERRORS, _generate_args, "previous_graph")
    add("generate", "sources/drugcentral.dump.08262018.sql.gz",
        [gzip_truncated, gzip_foreign, gzip_of(not_utf8), gzip_of(binary_garbage),
         gzip_of(lambda d: d.replace(b"2\t2001\tPUBCHEM_CID", b"2\t2001", 1))], _generate_args, "previous_graph")
    add("generate", "sources/9606.protein.links.v11.0.txt.gz",
        [gzip_of(lambda d: d.replace(b" 612", b" abc", 1))], _generate_args, "previous_graph")
    add("generate", "sources/Homo_sapiens_diffexpr-anatomy-simple.tsv.zip", [zip_truncated, binary_garbage],
        _generate_args, "previous_graph")
    for name in ("genes_to_phenotype.txt", "phenotype.hpoa", "hp.obo"):
        add("generate", f"sources/{name}", [not_utf8, binary_garbage], _generate_args, "previous_graph")
        add("generate", f"sources/{name}", [with_bom], _generate_args, "previous_graph", accepted=True)
    # leaderboard: result records
    add("leaderboard submit", "result.json", JSON_ERRORS + [json_not_object],
        lambda w, o: ["leaderboard", "submit", str(w / "result.json"), "--name", "m", "--db", str(o)],
        "board.sqlite")
    # text side modules
    add("metaeval", "metaeval/pred/title.tsv", [not_utf8, binary_garbage],
        lambda w, o: ["text", "metaeval", "--input", str(w / "metaeval" / "pred"), "--truth",
                      str(w / "metaeval" / "truth"), "--output", str(o)], "previous_metaeval")
    add("metaeval", "metaeval/pred/title.tsv", [with_bom, with_crlf],
        lambda w, o: ["text", "metaeval", "--input", str(w / "metaeval" / "pred"), "--truth",
                      str(w / "metaeval" / "truth"), "--output", str(o)], "previous_metaeval", accepted=True)
    brat_args = lambda w, o: ["text", "brat", "--gold", str(w / "brat" / "gold"), "--pred",  # noqa: E731
                              str(w / "brat" / "pred")]
    add("brat", "brat/pred/doc.ann", [not_utf8, truncated_line, binary_garbage,
                                      lambda d: d.replace(b" 0 7", b" 0 \xc2\xb2", 1),
                                      lambda d: d.replace(b"0 7", b"9 3", 1)], brat_args)
    add("brat", "brat/gold/doc.txt", [not_utf8], brat_args)
    add("brat", "brat/pred/doc.ann", [past_the_text], brat_args)
    ranking_args = lambda w, o: ["text", "rank-diseases", "--test-set", str(w / "cases.json"),  # noqa: E731
                                 "--annotations", str(w / "phenotype.hpoa"), "--ontology", str(w / "hp.obo"),
                                 "--cache-root", str(o), "--method", "set_jaccard", "--no-progress"]
    add("rank-diseases", "cases.json", JSON_ERRORS + [json_not_object], ranking_args, "previous_ranking")
    add("rank-diseases", "phenotype.hpoa", [empty, not_utf8, binary_garbage], ranking_args, "previous_ranking")
    add("rank-diseases", "hp.obo", [empty, not_utf8, binary_garbage, obo_cycle], ranking_args, "previous_ranking")
    add("rank-eval", "ranking/cases/cache/case_0000.json", JSON_ERRORS + [json_not_object],
        lambda w, o: ["text", "rank-eval", "--cache-dir", str(w / "ranking" / "cases" / "cache")],
        "ranking/cases/cache")
    return cases


CASES = _cases()


def _prepare(world: Dict[str, Path], case: Case, tmp_path: Path) -> Tuple[Path, Path]:
    """A copy of the world with the case's file damaged, and the output location filled by an
    earlier successful run of the same command (or left absent)."""
    copy = tmp_path / "world"
    shutil.copytree(world["root"], copy, symlinks=True)
    if case.target.startswith("sources/"):
        shutil.copytree(SAMPLE_DIR, copy / "sources")
    target = copy / case.target
    target.write_bytes(case.damage(target.read_bytes()))
    output = copy / (case.output or "unused_output")
    if case.output and case.output.startswith("previous_") and not case.output.endswith(".json"):
        output.mkdir()
        (output / ".openbench-output.json").write_text(json.dumps(
            {"written_by": "openbench", "kind": "earlier run", "version": "0", "entries": ["old.txt"]}))
        (output / "old.txt").write_text("the previous output\n")
    if case.output == "previous_result.json":
        output.write_text(json.dumps({"written_by": "openbench", "metrics": "the previous result"}))
    return copy, output


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_malformed_input(world, case, tmp_path):
    copy, output = _prepare(world, case, tmp_path)
    before = snapshot(output)
    done = CliRunner().invoke(main, case.args(copy, output))
    stderr = done.stderr
    assert "Traceback" not in done.output and "Aborted!" not in done.output, done.output
    assert "internal error" not in stderr, stderr
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    if case.accepted:
        assert done.exit_code == 0, stderr
        return
    assert done.exit_code in (1, 2), (done.exit_code, done.output)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    damaged = Path(case.target).name
    assert damaged in errors[0] or str(copy / case.target) in errors[0], errors[0]
    assert snapshot(output) == before, "the output location changed"


def test_the_corpus_covers_every_command():
    commands = {case.command for case in CASES}
    assert commands >= {"split", "split time", "split --dataset", "evaluate", "export-kgid", "train", "export", "generate",
                        "leaderboard submit", "metaeval", "brat", "rank-diseases", "rank-eval"}
    assert len(CASES) >= 150


BAD_OPTIONS = [
    (["split", "rand", "--neg-ratio", "-1"], "--neg-ratio"), (["split", "rand", "--neg-ratio", "nan"], "--neg-ratio"),
    (["split", "rand", "--test-frac", "1.5"], "--test-frac"), (["split", "rand", "--val", "inf"], "--val"),
    (["split", "time", "--val", "-0.1"], "--val"), (["train", "--lr", "nan"], "--lr"), (["train", "--lr", "-1"], "--lr"),
    (["train", "--epochs", "0"], "--epochs"), (["evaluate", "--batch-size", "0"], "--batch-size"),
    (["evaluate", "--dataset", "d", "--hits-at", "0"], "--hits-at"),
    (["evaluate", "--dataset", "d", "--filter", "dev"], "--filter"),
    (["evaluate", "--model", "TransQ"], "--model"), (["generate", "--output-format", "DOCX"], "--output-format"),
    (["text", "rank-diseases", "--top-n", "0"], "--top-n"), (["leaderboard", "show", "--side", "left"], "--side"),
]


@pytest.mark.parametrize("args,option", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_values_are_usage_errors(world, args, option):
    """Ranges are checked by the option types, before any file is read: exit 2, the option named."""
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2, done.output
    assert option in done.stderr and "Traceback" not in done.output
