"""The repurposing record: the command line's protocol line and a valid record, a forged record
refused, the board's own table and its reproduction, the report's figures, and one record on
one process and several (torch.distributed, torchrun)."""
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.models.scorers import build_scorer
from tests.evaluation.repurposing.reference import planted_model


def test_the_command_line_prints_the_protocol_line_and_writes_a_valid_record(planted, tmp_path):
    from openbench.record import validate_record

    scorer, entities, relations = planted_model(planted, "DistMult", True)
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", relations)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, "--model", "DistMult",
                                     "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                     str(tmp_path / "r.npy"), "--task", "repurposing", "--relation", "indication",
                                     "--negative-relation", "contraindication", "--recall-at", "1,10",
                                     "--bootstrap", "20", "--protocol", "txgnn", "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    assert "matrix 14 drugs × 11 diseases = 154 pairs; filtered" in done.output
    assert "TxGNN's protocol" in done.output and "per disease" in done.output
    record = json.loads((tmp_path / "r.json").read_text())
    validate_record(record)
    assert record["task"] == "repurposing" and record["repurposing"]["confidence"]["resamples"] == 20
    again = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, "--model", "DistMult",
                                      "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                      str(tmp_path / "r.npy"), "--task", "repurposing", "--relation", "indication",
                                      "--negative-relation", "contraindication", "--recall-at", "1,10",
                                      "--bootstrap", "20", "--protocol", "txgnn", "--output",
                                      str(tmp_path / "again.json")])
    assert again.exit_code == 0
    first, second = (json.loads((tmp_path / name).read_text()) for name in ("r.json", "again.json"))
    first.pop("timing"), second.pop("timing")
    assert first == second  # the same seed, the same record (timing aside)


def test_a_forged_repurposing_record_is_refused(planted):
    from openbench.record import RecordError, validate_record

    scorer, _, _ = planted_model(planted, "DistMult", True)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                recall_at=[1, 10, 100]).to_dict()
    validate_record(record)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]["recall@10"] = 0.0
    broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]["recall@1"] = 0.5
    with pytest.raises(RecordError, match="recall@10 = 0.0 < recall@1"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["matrix"]["pairs"] += 1
    with pytest.raises(RecordError, match="pairs must be drugs × diseases"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["views"]["test"]["full_matrix"]["auroc"] = 1.5
    with pytest.raises(RecordError, match=r"auroc = 1.5: expected a value in \[0, 1\]"):
        validate_record(broken)
    # the blocks are checked as a ranking record's are: MRR against recall@n, every rank type there
    broken = json.loads(json.dumps(record))
    block = broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]
    block["realistic"].update({"recall@1": 0.0, "recall@10": 0.0, "mrr": 0.9})
    with pytest.raises(RecordError, match="MRR 0.9 is impossible with recall@"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    del broken["repurposing"]["views"]["test"]["disease_specific"]["macro"]["pessimistic"]
    with pytest.raises(RecordError, match=r"disease_specific.macro.pessimistic is missing"):
        validate_record(broken)


# -- the leaderboard ----------------------------------------------------------------------------------

def test_the_board_ranks_repurposing_records_in_a_table_of_their_own_and_reproduces_them(planted, tmp_path):
    """Repurposing rows never mix with ranking rows; a model submitted with its files is
    re-evaluated by the board (the same record, verified: reproduced)."""
    db = tmp_path / "board.sqlite"
    for seed in (1, 2):
        scorer, entities, relations = planted_model(planted, "DistMult", False, seed=seed)
        np.save(tmp_path / f"e{seed}.npy", entities)
        np.save(tmp_path / f"r{seed}.npy", relations)
        model = ["--model", "DistMult", "--entity-embeddings", str(tmp_path / f"e{seed}.npy"),
                 "--relation-embeddings", str(tmp_path / f"r{seed}.npy")]
        done = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, *model, "--task", "repurposing",
                                         "--relation", "indication", "--recall-at", "1,10,100",
                                         "--output", str(tmp_path / f"rep{seed}.json")])
        assert done.exit_code == 0, done.output
        extra = ["--dataset", planted.path, *model] if seed == 1 else []
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / f"rep{seed}.json"), "--name",
                                         f"DistMult {seed}", *extra, "--db", str(db)])
        assert done.exit_code == 0, done.output
        assert ("reproduced by the board" in done.output) == (seed == 1)
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--task", "repurposing", "--db", str(db), "--format",
                                      "json"])
    assert shown.exit_code == 0, shown.output
    rows = {row["name"]: row for row in json.loads(shown.output)}
    assert set(rows) == {"DistMult 1", "DistMult 2"}
    assert rows["DistMult 1"]["verified"] == "reproduced" and rows["DistMult 2"]["verified"] == "self"
    record = json.loads((tmp_path / "rep1.json").read_text())
    view = record["repurposing"]["views"]["test"]
    assert rows["DistMult 1"]["metrics"]["auroc"]["mean"] == view["full_matrix"]["auroc"]
    assert rows["DistMult 1"]["metrics"]["disease_mrr"]["mean"] == \
        view["disease_specific"]["macro"]["realistic"]["mrr"]
    table = CliRunner().invoke(main, ["leaderboard", "show", "--task", "repurposing", "--db", str(db)]).output
    assert "drug repurposing, indication" in table and "disease_mrr" in table and "recall@100" in table
    ranking = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)])
    assert "DistMult 1" not in ranking.output


def test_the_report_draws_the_repurposing_figures(planted, tmp_path):
    paths = []
    for name in ("DistMult", "TransE-L2"):
        scorer, _, _ = planted_model(planted, name, False, seed=3)
        record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                    recall_at=[1, 10, 100], hits_at=[1, 3, 10]).to_dict()
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(record))
    done = CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "report")])
    assert done.exit_code == 0, done.output
    figures = json.loads((tmp_path / "report" / "figures.json").read_text())["figures"]
    assert set(figures) == {"recall_curve", "hits_curve", "per_disease", "frequent_flyers"}
    record = json.loads(paths[0].read_text())
    realistic = record["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]
    assert figures["recall_curve"]["DistMult"] == [[n, realistic[f"recall@{n}"]] for n in (1, 10, 100)]
    per_disease = record["repurposing"]["views"]["test"]["disease_specific"]["per_disease"]
    assert sorted(v["auprc"] for v in per_disease.values()) == figures["per_disease"]["DistMult"]
    for key in figures:
        assert (tmp_path / "report" / f"{key}.png").stat().st_size > 1000
    page = (tmp_path / "report" / "index.html").read_text()
    assert "drug repurposing" in page and "Recall@n over the whole drug × disease matrix" in page
    ranking = openbench.evaluate(planted, planted_model(planted, "DistMult", False)[0]).to_dict()
    (tmp_path / "ranking.json").write_text(json.dumps(ranking))
    done = CliRunner().invoke(main, ["report", str(paths[0]), str(tmp_path / "ranking.json"), "--output",
                                     str(tmp_path / "mixed")])
    assert done.exit_code == 1 and "different tasks" in done.output


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_the_record_is_the_same_on_one_process_and_several(planted, tmp_path, world, monkeypatch):
    """--shard entities over torch.distributed (gloo): the drugs' blocks dealt over the ranks, the
    counts summed; the record equals one process's, byte for byte (timing aside). Small blocks, so
    that every rank holds several."""
    import torch.multiprocessing as mp

    from openbench.evaluation.counting import matrix
    from tests.bases import repurposing_worker

    monkeypatch.setenv(matrix.BLOCK_VARIABLE, "64")  # read by the spawned ranks too
    rng = np.random.default_rng(2)
    entities = rng.normal(size=(planted.num_entities, 6)).astype(np.float32)
    relations = rng.normal(size=(planted.num_relations, 6)).astype(np.float32)
    scorer = build_scorer("DistMult", entities, relations, planted.num_entities, planted.num_relations)
    one = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                             negative_relations=["contraindication"], recall_at=[1, 10, 50], keep_top=30).to_dict()
    one.pop("timing")
    out = tmp_path / "sharded.json"
    mp.spawn(repurposing_worker, args=(world, planted.path, str(tmp_path / "rendezvous"), str(out), 2), nprocs=world,
             join=True)
    assert json.loads(out.read_text()) == json.loads(json.dumps(one, sort_keys=True))


@pytest.mark.slow
def test_torchrun_gives_the_one_process_record(planted, tmp_path):
    """``torchrun … evaluate --task repurposing --distributed``: the drugs dealt over two ranks, rank 0
    writes the record, which equals one process's (timing aside)."""
    import subprocess
    import sys

    scorer, entities, relations = planted_model(planted, "DistMult", False)
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", relations)
    base = ["-m", "openbench", "evaluate", "--dataset", planted.path, "--model", "DistMult", "--entity-embeddings",
            str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"), "--task", "repurposing",
            "--relation", "indication", "--negative-relation", "contraindication", "--no-progress"]
    env = {**os.environ, "OPENBENCH_MATRIX_BLOCK_KEYS": "64"}
    single = subprocess.run([sys.executable, *base, "--output", str(tmp_path / "one.json")], capture_output=True,
                            text=True, timeout=120, env=env)
    assert single.returncode == 0, single.stderr
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                          "29523", *base, "--distributed", "--output", str(tmp_path / "two.json")],
                         capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 0, run.stderr
    one, two = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "two.json"))
    one.pop("timing"), two.pop("timing")
    assert one == two
