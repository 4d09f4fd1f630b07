"""The six published biomedical KGs by name: each served on 127.0.0.1 in its publisher's layout,
built from the real rows in tests/data/kgs/ (SOURCE.md per folder), with a registry entry of its
own (its files' sha256 and the counts the archive holds); ``datasets get`` -> ``split rand`` ->
``evaluate`` run on each, and what each reader must fix is checked against a plain reference."""
import csv
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError
from openbench.datasets.published import MARKER, NATIVE_DATASETS, lookup
from tests.helpers import PROJECT_ROOT, zip_bytes as _zip
from tests.http_server import FileServer

KGS = PROJECT_ROOT / "tests" / "data" / "kgs"


def _tar_gz(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tsv_rows(path, skip_comments=True):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines if line and not (skip_comments and line.startswith("#"))]


# -- the archives, in each publisher's layout ------------------------------------------------------


def hetionet():
    """nodes TSV (the verbatim CRLF excerpt, plus a row for each edge node outside it) and the SIF
    rows of the hetnetpy subgraph, gzipped, as hetio/hetionet publishes them."""
    nodes_text = (KGS / "hetionet" / "hetionet-v1.0-nodes.excerpt.tsv").read_bytes()
    listed = {line.split(b"\t")[0].decode() for line in nodes_text.split(b"\r\n")[1:] if line}
    sif = (KGS / "hetionet" / "edges.from-hetnetpy-random-subgraph.sif").read_text()
    edges = [line.split("\t") for line in sif.splitlines()[1:]]
    extra = sorted({node for h, _, t in edges for node in (h, t)} - listed)
    nodes_text += b"".join(f"{node}\t(outside the excerpt)\t{node.split('::')[0]}\r\n".encode() for node in extra)
    files = {"hetionet-v1.0-nodes.tsv": nodes_text, "hetionet-v1.0-edges.sif.gz": gzip.compress(sif.encode())}
    nodes = len(listed) + len(extra)
    return files, {"nodes": nodes, "rows": len(edges)}, {"nodes": nodes, "edges": len(edges),
                                                         "isolated": len(listed - {n for h, _, t in edges for n in (h, t)})}


def _primekg_rows():
    with open(KGS / "primekg" / "kg.head6.verbatim.csv", newline="", encoding="utf-8") as handle:
        head = list(csv.reader(handle))
    with open(KGS / "primekg" / "kg.rows.from-autism-notebook.csv", newline="", encoding="utf-8") as handle:
        notebook = [row[2:] for row in list(csv.reader(handle))[1:]]  # the two provenance columns dropped
    return head[0], head[1:] + notebook


def _denser(rows, count, seed):
    """``count`` more rows between the excerpt's own nodes: each copies a real row's relation and
    node types and draws its two nodes (seeded) from the excerpt's nodes of those types, so a split
    has nodes seen in training (the excerpt is a few stars around hub nodes)."""
    rng = np.random.default_rng(seed)
    by_type = {}
    for row in rows:
        for node in (row[2:7], row[7:12]):
            by_type.setdefault(node[2], {})[tuple(node)] = None
    pools = {kind: list(nodes) for kind, nodes in by_type.items()}
    made = []
    for _ in range(count):
        template = rows[int(rng.integers(len(rows)))]
        x = pools[template[4]][int(rng.integers(len(pools[template[4]])))]
        y = pools[template[9]][int(rng.integers(len(pools[template[9]])))]
        if x != y:
            made.append([template[0], template[1], *x, *y])
    return made


def _hierarchy_rows(rows):
    """PrimeKG's disease hierarchy as the build writes it: the one disease_disease row transcribed
    from the build notebook (adrenal cortex disorder, parent, to adrenocortical insufficiency,
    child: ``display_relation`` "parent-child"), in kg.csv's layout (x_index/y_index, which that
    table lacks, assigned here), and, added by the test so that the two diseases have treatments to
    hold out, four drug–disease rows from them to drugs of the excerpt (seeded; indication,
    contraindication and off-label use, the three TxGNN holds out), in the layout of the excerpt's
    own indication rows."""
    with open(KGS / "primekg" / "kg_raw-format.rows.from-build_graph-notebook.csv", newline="",
              encoding="utf-8") as handle:
        raw = [row[2:] for row in list(csv.reader(handle))[1:] if row[2] == "disease_disease"]
    relation, display, x_id, x_type, x_name, x_source, y_id, y_type, y_name, y_source = raw[0]
    made = [[relation, display, "90000", x_id, x_type, x_name, x_source, "90001", y_id, y_type, y_name, y_source]]
    drugs = sorted({tuple(row[7:12]) for row in rows if row[9] == "drug"} | {tuple(row[2:7]) for row in rows
                                                                           if row[4] == "drug"})
    rng = np.random.default_rng(51)
    relations = [("indication", "indication"), ("contraindication", "contraindication"),
                 ("off-label use", "off-label use")]
    for number, disease in enumerate((made[0][2:7], made[0][7:12])):
        for index in rng.choice(len(drugs), 2, replace=False).tolist():
            made.append([*relations[(number + index) % 3], *disease, *drugs[index]])
    return made


def primekg():
    """kg.csv as PrimeKG's build writes it: every row, then its x/y-swapped copy, plus one exact
    duplicate row (as the real file's 370). The rows: the excerpt's, :func:`_hierarchy_rows`' and
    :func:`_denser`'s."""
    header, rows = _primekg_rows()
    rows = rows + _hierarchy_rows(rows)
    rows = rows + _denser(rows, 150, 2)
    x, y = slice(2, 7), slice(7, 12)
    unique = list(dict.fromkeys(tuple(row) for row in rows))
    swapped = [row[:2] + row[y] + row[x] for row in map(list, unique)]
    written = [list(row) for row in unique] + swapped + [list(unique[0])]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(written)
    ids = {(row[4], row[6], row[3]) for row in written} | {(row[9], row[11], row[8]) for row in written}
    keys = [(row[0], row[4], row[6], row[3], row[9], row[11], row[8]) for row in written]
    return {"kg.csv": buffer.getvalue().encode()}, {"rows": len(written), "nodes": len(ids)}, \
        {"unique": unique, "exact_duplicates": len(keys) - len(set(keys))}


def drkg():
    """drkg.tar.gz with drkg.tsv (headerless: the three verbatim DRKG excerpts, one repeated row and
    one row with an empty gene id, as in gnn4dr/DRKG#32) and a macOS resource fork beside it."""
    rows = []
    for name in ("drkg.rows.from-issue-28.tsv", "coronavirus-related-host-genes.tsv", "covid19-host-genes.head171.tsv"):
        rows += (KGS / "drkg" / name).read_text(encoding="utf-8").splitlines()
    rows += [rows[5], "Gene::\tGNBR::E::Gene:Gene\tGene::2931"]
    text = "\n".join(rows) + "\n"
    files = {"drkg.tar.gz": _tar_gz({"drkg.tsv": text.encode(), "._drkg.tsv": b"\x00\x05\x16\x07 resource fork"})}
    relations = {row.split("\t")[1] for row in rows}
    kept = [row for row in rows if not any(side.endswith("::") for side in row.split("\t")[::2])]
    return files, {"rows": len(rows), "relations": len(relations)}, {"first": rows[0].split("\t"),
                                                                      "distinct_kept": len(set(kept)),
                                                                      "repeats": len(kept) - len(set(kept))}


# ogbl-biokg: the 51 real triplet types; num-node-dict.csv.gz's columns deliberately unsorted
OGB_TYPES = {"protein": 30, "drug": 25, "disease": 14, "sideeffect": 12, "function": 16}


def _ogb_triplets():
    rows = _tsv_rows(KGS / "ogbl-biokg" / "triplet-types.with-train-edge-counts.tsv")[1:]
    return [(head, relation, tail) for _, head, relation, tail, _ in rows]


def ogbl_biokg():
    """biokg.zip holding biokg/ as OGB builds it: raw/num-node-dict.csv.gz, triplet-type-list,
    split/random/{train,valid,test}.pt (dicts of arrays; valid/test with 6 typed negatives per side);
    same-type relations stored in both directions, as OGB describes them."""
    rng = np.random.default_rng(0)
    triplets = _ogb_triplets()
    records = []
    for relation, (head, _, tail) in enumerate(triplets):
        for _ in range(12):
            a, b = int(rng.integers(OGB_TYPES[head])), int(rng.integers(OGB_TYPES[tail]))
            records.append((a, relation, b, head, tail))
            if head == tail:
                records.append((b, relation, a, head, tail))
    records = list(dict.fromkeys(records))
    order = rng.permutation(len(records))
    cut = {"test": order[:40], "valid": order[40:80], "train": order[80:]}
    files = {"biokg/RELEASE_v1.txt": b"ogbl-biokg v1\n"}
    for split, chosen in cut.items():
        picked = [records[i] for i in sorted(chosen)]
        data = {"head": np.array([r[0] for r in picked]), "relation": np.array([r[1] for r in picked]),
                "tail": np.array([r[2] for r in picked]), "head_type": [r[3] for r in picked],
                "tail_type": [r[4] for r in picked]}
        if split != "train":
            data["head_neg"] = np.stack([rng.integers(0, OGB_TYPES[r[3]], 6) for r in picked])
            data["tail_neg"] = np.stack([rng.integers(0, OGB_TYPES[r[4]], 6) for r in picked])
        buffer = io.BytesIO()
        torch.save(data, buffer)
        files[f"biokg/split/random/{split}.pt"] = buffer.getvalue()
    node_dict = ",".join(OGB_TYPES) + "\n" + ",".join(map(str, OGB_TYPES.values())) + "\n"
    files["biokg/raw/num-node-dict.csv.gz"] = gzip.compress(node_dict.encode())
    files["biokg/raw/triplet-type-list.csv.gz"] = gzip.compress("".join(",".join(t) + "\n" for t in triplets).encode())
    counts = {split: len(chosen) for split, chosen in cut.items()}
    return {"biokg.zip": _zip(files)}, {**counts, "entities": sum(OGB_TYPES.values())}, {"files": files}


def biokg():
    """biokg.zip with biokg.links.tsv (headerless): the 5 transcribed BioKG rows first, then seeded
    rows in BioKG's id syntax (no longer text excerpt of the file exists), DPI repeating some
    DRUG_TARGET pairs as the real file does."""
    real = ["\t".join(row[:3]) for row in _tsv_rows(KGS / "biokg" / "biokg.links.rows.transcribed.tsv")]
    rng = np.random.default_rng(1)
    proteins = [f"P{10000 + i}" for i in range(40)]
    drugs = [f"DB{i:05d}" for i in range(1, 26)]
    diseases = [f"D{i:06d}" for i in range(12)]
    pathways = [f"hsa{i:05d}" for i in range(8)]
    made = []
    for _ in range(260):
        kind = rng.integers(4)
        if kind == 0:
            a, b = sorted(rng.choice(proteins, 2, replace=False))
            made.append(f"{a}\tPPI\t{b}")
        elif kind == 1:
            drug, protein = rng.choice(drugs), rng.choice(proteins)
            made += [f"{drug}\tDRUG_TARGET\t{protein}", f"{drug}\tDPI\t{protein}"]
        elif kind == 2:
            made.append(f"{rng.choice(proteins)}\tPROTEIN_DISEASE_ASSOCIATION\t{rng.choice(diseases)}")
        else:
            made.append(f"{rng.choice(proteins)}\tPROTEIN_PATHWAY_ASSOCIATION\t{rng.choice(pathways)}")
    rows = real + made
    text = "\n".join(rows) + "\n"
    members = {"biokg.links.tsv": text.encode(), "README.md": b"BioKG\n", "LICENSE": b"CC BY-NC 4.0\n"}
    relations = {row.split("\t")[1] for row in rows}
    return {"biokg.zip": _zip(members)}, {"rows": len(rows), "relations": len(relations)}, {"rows": rows}


def pharmkg8k():
    """train/valid/test.tsv (headerless). Only test.tsv's first 200 lines and 104 problem lines
    of test.tsv and valid.tsv survive as text: train.tsv is test.tsv's lines 1-150, test.tsv its
    lines 151-200 plus the test problem lines, valid.tsv the valid problem lines (all verbatim)."""
    head = (KGS / "pharmkg" / "test.head200.verbatim.tsv").read_text(encoding="utf-8").splitlines()
    problems = _tsv_rows(KGS / "pharmkg" / "problem-rows.test-valid.tsv")
    from_file = {name: ["\t".join(row[3:6]) for row in problems if row[0] == name] for name in ("test.tsv", "valid.tsv")}
    texts = {"train.tsv": head[:150], "test.tsv": head[150:] + from_file["test.tsv"], "valid.tsv": from_file["valid.tsv"]}
    files = {name: ("\n".join(lines) + "\n").encode() for name, lines in texts.items()}
    counts = {name[:-4]: len(lines) for name, lines in texts.items()}
    relations = {line.split("\t")[1] for lines in texts.values() for line in lines}
    return files, {**counts, "relations": len(relations)}, {"texts": texts}


BUILDERS = {"hetionet": hetionet, "primekg": primekg, "drkg": drkg, "ogbl-biokg": ogbl_biokg, "biokg": biokg,
            "pharmkg8k": pharmkg8k}


@pytest.fixture(scope="module")
def served():
    """Every archive on one local server, with the builders' extra facts, by format."""
    built = {fmt: build() for fmt, build in BUILDERS.items()}
    paths = {f"/{fmt}/{name}": data for fmt, (files, _, _) in built.items() for name, data in files.items()}
    with FileServer(paths) as server:
        yield server, built


def _entry(server, fmt, built, **changes):
    files, check, _ = built[fmt]
    entry = {"name": f"{fmt}-fixture", "format": fmt, "license": "as the publisher's (tests/data/kgs)",
             "version": "fixture", "counts": {"check": check},
             "files": [{"url": f"{server.base_url}/{fmt}/{name}", "sha256": hashlib.sha256(data).hexdigest(),
                        "size": len(data)} for name, data in files.items()]}
    entry.update(changes)
    return entry


@pytest.fixture()
def lab(tmp_path, served, monkeypatch):
    """A registry file of the six fixture entries, the data root, and a runner of commands."""
    server, built = served
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps([_entry(server, fmt, built) for fmt in BUILDERS]))
    monkeypatch.setenv("OPENBENCH_REGISTRY", str(registry_file))
    monkeypatch.setenv("OPENBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OPENBENCH_CACHE_DIR", str(tmp_path / "cache"))

    def run(*args):
        done = CliRunner().invoke(main, [str(a) for a in args])
        assert done.exit_code == 0, done.output
        return done.stdout
    return server, built, registry_file, run


def _get_split_evaluate(tmp_path, run, fmt, *evaluate_options):
    name = f"{fmt}-fixture"
    folder = Path(run("datasets", "get", name, "--no-progress").strip())
    assert folder == tmp_path / "data" / name
    split = tmp_path / f"{fmt}-split"
    run("split", "rand", "--dataset", name, "--output", split, "--test-frac", 0.2, "--val", 0.1, "--seed", 3)
    info = json.loads((split / "split_info.json").read_text())
    record_path = tmp_path / f"{fmt}-record.json"
    run("evaluate", "--dataset", split, "--model", "popularity", "--no-progress", "--output", record_path,
        *evaluate_options)
    return folder, info, json.loads(record_path.read_text()), split


def _get_with(tmp_path, entries, name):
    """(the CLI's result, the data root) of ``datasets get name`` with a registry file of ``entries``."""
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps(entries))
    root = tmp_path / "data"
    done = CliRunner().invoke(main, ["datasets", "--registry", registry_file, "get", name, "--root", root,
                                     "--no-progress"])
    return done, root


def _kept_files(root):
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")]


def _triples(path):
    return {tuple(line.split("\t")[:3]) for line in path.read_text(encoding="utf-8").splitlines() if line}


def _check_common(folder, info, record, split, fmt):
    marker = json.loads((folder / MARKER).read_text())
    assert marker["name"] == f"{fmt}-fixture" and marker["format"] == fmt
    assert info["dataset"]["name"] == f"{fmt}-fixture" and info["dataset"]["files_sha256"] == marker["files_sha256"]
    graph = json.loads((folder / "graph" / "graph_info.json").read_text())
    assert info["dataset"]["problems"] == graph["problems"] and info["dataset"]["id_scheme"] == graph["id_scheme"]
    registry = record["dataset"]["registry"]
    assert registry["name"] == f"{fmt}-fixture" and registry["version"] == "fixture"
    assert registry["split"] == "openbench split rand, seed 3"
    assert registry["files_sha256"] == marker["files_sha256"]
    test = _triples(split / "test_sample.csv")
    assert test and record["dataset"]["counts"]["test"] == len(test) == info["split"]["test"]["positives"]
    training = _triples(split / "train_sample.csv") | _triples(split / "val_sample.csv")
    assert not test & training
    return graph, test, training


# -- each dataset end to end -----------------------------------------------------------------------


def test_hetionet_nodes_edges_and_isolated_nodes(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "hetionet")
    graph, test, training = _check_common(folder, info, record, split, "hetionet")
    expected = built["hetionet"][2]
    assert graph["counts"]["nodes"] == expected["nodes"] and graph["counts"]["edges"] == expected["edges"]
    assert graph["problems"]["isolated_nodes_kept"] == expected["isolated"] > 0
    nodes = (folder / "graph" / "nodes.csv").read_text().splitlines()
    assert len(nodes) == expected["nodes"] and "Anatomy::UBERON:0000002\tAnatomy" in nodes  # CRLF gone, kind kept
    assert sorted(graph["relations"]) == sorted({r for _, r, _ in _triples(folder / "graph" / "edges.csv")})
    assert [name for name, rel in graph["relations"].items() if rel["directed"]] == ["Gr>G"]
    assert len(graph["relations"]) == 24
    # an undirected metaedge's test edge is never in training the other way round
    assert not {(t, r, h) for h, r, t in test} & training


def test_primekg_collapses_the_swapped_copies_so_no_reverse_of_a_test_triple_is_in_training(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "primekg")
    graph, test, training = _check_common(folder, info, record, split, "primekg")
    unique = built["primekg"][2]["unique"]
    problems = info["dataset"]["problems"]
    assert problems["exact_duplicates_dropped"] == built["primekg"][2]["exact_duplicates"] >= 1
    swapped_unique = {(r[4], r[6], r[3], r[0], r[9], r[11], r[8]) for r in unique}
    mirrored = {(r[9], r[11], r[8], r[0], r[4], r[6], r[3]) for r in unique}
    # a row whose swapped copy the excerpt itself already holds collapses with it as well
    assert problems["reverse_copies_collapsed"] == len(swapped_unique | mirrored) - graph["counts"]["edges"]
    assert graph["counts"]["edges"] == len({(r[0], *sorted([(r[4], r[6], r[3]), (r[9], r[11], r[8])]))
                                            for r in unique})
    assert all(rel["directed"] is False for rel in graph["relations"].values())
    assert not {(t, r, h) for h, r, t in test} & training, "a reverse copy of a test triple is in training"
    assert not test & training
    # ids by type + source + id: Risperidone is drug::DrugBank::DB00734, whatever its name
    names = dict(line.split("\t") for line in (folder / "graph" / "node_names.tsv").read_text().splitlines()[1:])
    assert names["drug::DrugBank::DB00734"] == "Risperidone"
    assert graph["counts"]["nodes"] == built["primekg"][1]["nodes"]


def test_drkg_keeps_its_first_line_refuses_empty_ids_and_skips_resource_forks(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "drkg")
    graph, _, _ = _check_common(folder, info, record, split, "drkg")
    problems = info["dataset"]["problems"]
    expected = built["drkg"][2]
    assert problems["rows_with_empty_ids_refused"] == 1 and problems["exact_duplicates_dropped"] == expected["repeats"]
    assert problems["relation_type_mismatches"] == 0
    edges = _triples(folder / "graph" / "edges.csv")
    assert tuple(built["drkg"][2]["first"]) in edges  # no header ate the first triple
    assert "Disease::SARS-CoV2 E\tDisease" in (folder / "graph" / "nodes.csv").read_text().splitlines()
    assert not any(node.endswith("::") for triple in edges for node in (triple[0], triple[2]))
    assert not list((folder / "native").glob("._*"))
    assert graph["counts"]["edges"] == expected["distinct_kept"] == built["drkg"][1]["rows"] - 1 - expected["repeats"]


def test_ogbl_biokg_official_split_uses_ogbs_sorted_type_offsets(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "ogbl-biokg")
    _check_common(folder, info, record, split, "ogbl-biokg")
    assert list(OGB_TYPES) != sorted(OGB_TYPES)  # the CSV's columns are not in OGB's order
    official = load_dataset("ogbl-biokg-fixture")
    offsets, first = {}, 0
    for kind in sorted(OGB_TYPES):  # ogb/io/read_graph_raw.py: nodetype_list = sorted(...)
        offsets[kind] = first
        first += OGB_TYPES[kind]
    test = torch.load(io.BytesIO(built["ogbl-biokg"][2]["files"]["biokg/split/random/test.pt"]), weights_only=False)
    heads = np.asarray(test["head"]) + np.array([offsets[kind] for kind in test["head_type"]])
    tails = np.asarray(test["tail"]) + np.array([offsets[kind] for kind in test["tail_type"]])
    assert official.triples["test"][:, 0].tolist() == heads.tolist()
    assert official.triples["test"][:, 2].tolist() == tails.tolist()
    assert official.entity_labels[offsets["protein"]] == "protein:0"
    # the official split, evaluated by name, says which split it is
    out = tmp_path / "official.json"
    run("evaluate", "--dataset", "ogbl-biokg-fixture", "--model", "popularity", "--no-progress", "--output", out)
    registry = json.loads(out.read_text())["dataset"]["registry"]
    assert registry["name"] == "ogbl-biokg-fixture" and registry["split"] == "official, as published"
    graph = json.loads((folder / "graph" / "graph_info.json").read_text())
    same_type = {f"relation:{i}" for i, (h, _, t) in enumerate(_ogb_triplets()) if h == t}
    assert {name for name, rel in graph["relations"].items() if not rel["directed"]} == same_type
    assert info["dataset"]["problems"]["reverse_copies_collapsed"] > 0


def test_biokg_keeps_its_first_line_and_types_nodes_by_relation(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "biokg")
    graph, _, _ = _check_common(folder, info, record, split, "biokg")
    # links_description.txt: PPI (<uniprot_acc> PPI <uniprot_acc>) and DDI (<drugbank_id> DDI <drugbank_id>)
    # are the interactions between two entities of one kind, stored once: the only undirected relations
    undirected = {name for name, relation in graph["relations"].items() if not relation["directed"]}
    assert undirected == {"PPI", "DDI"} & set(graph["relations"]) and "PPI" in undirected
    rows = built["biokg"][2]["rows"]
    assert tuple(rows[0].split("\t")) in _triples(folder / "graph" / "edges.csv")
    nodes = dict(line.split("\t") for line in (folder / "graph" / "nodes.csv").read_text().splitlines())
    assert nodes["C566487"] == "disease" and nodes["hsa00071"] == "pathway" and nodes["P00734"] == "protein"
    triples = [tuple(row.split("\t")) for row in rows]
    targets = {(h, t) for h, r, t in triples if r == "DRUG_TARGET"}
    assert info["dataset"]["problems"]["exact_duplicates_dropped"] == len(triples) - len(set(triples))
    assert info["dataset"]["problems"]["dpi_copies_of_drug_function_links"] == sum(
        1 for h, r, t in triples if r == "DPI" and (h, t) in targets) > 0
    # the split's relation-pattern cleaning sees DPI duplicating DRUG_TARGET
    assert any({pair["relation"], pair["duplicate"]} == {"DPI", "DRUG_TARGET"}
               for pair in info["relation_patterns"]["duplicate_relations"])


def test_pharmkg8k_official_split_kept_as_published_with_its_overlaps_counted(tmp_path, lab):
    _, built, _, run = lab
    folder, info, record, split = _get_split_evaluate(tmp_path, run, "pharmkg8k")
    _check_common(folder, info, record, split, "pharmkg8k")
    texts = built["pharmkg8k"][2]["texts"]
    for name, published in (("train", "train.tsv"), ("valid", "valid.tsv"), ("test", "test.tsv")):
        kept = {"train": "train_sample.csv", "valid": "val_sample.csv", "test": "test_sample.csv"}[name]
        assert (folder / "split" / kept).read_bytes() == (folder / "native" / published).read_bytes()
    test = [tuple(line.split("\t")) for line in texts["test.tsv"]]
    valid = [tuple(line.split("\t")) for line in texts["valid.tsv"]]
    train = [tuple(line.split("\t")) for line in texts["train.tsv"]]
    problems = info["dataset"]["problems"]
    assert problems["repeated_lines_test"] == len(test) - len(set(test)) > 0
    assert problems["triples_in_test_and_valid"] == len(set(test) & set(valid)) > 0
    assert problems["test_triples_reversed_in_valid"] == len({(h, r, t) for h, r, t in set(test)
                                                              if (t, r, h) in set(valid)}) > 0
    assert problems["self_loops_test"] == sum(1 for h, _, t in test if h == t)
    seen = {e for h, _, t in train for e in (h, t)}
    assert problems["test_triples_with_entities_unseen_in_train"] == len(
        [1 for h, _, t in set(test) if h not in seen or t not in seen])
    out = tmp_path / "official.json"
    run("evaluate", "--dataset", "pharmkg8k-fixture", "--model", "popularity", "--drop-unknown", "--no-progress",
        "--output", out)
    official = json.loads(out.read_text())
    assert official["dataset"]["registry"]["split"] == "official, as published"
    assert official["dataset"]["counts"]["test"] == len({t for t in set(test) if t[0] in seen and t[2] in seen})


# -- verification and refusal ----------------------------------------------------------------------


def test_a_file_whose_bytes_differ_from_the_pinned_checksum_is_refused_and_nothing_kept(tmp_path, served):
    server, built = served
    entry = _entry(server, "hetionet", built)
    entry["files"][1]["sha256"] = hashlib.sha256(b"other bytes").hexdigest()
    done, root = _get_with(tmp_path, [entry], "hetionet-fixture")
    assert done.exit_code == 1 and "sha256" in done.output and "discarded" in done.output, done.output
    assert _kept_files(root) == []


def test_counts_that_differ_from_the_publishers_are_refused_and_nothing_kept(tmp_path, served):
    server, built = served
    entry = _entry(server, "drkg", built, counts={"check": {"rows": built["drkg"][1]["rows"] + 1}})
    done, root = _get_with(tmp_path, [entry], "drkg-fixture")
    assert done.exit_code == 1 and "the publisher states" in done.output and "nothing was kept" in done.output, \
        done.output
    assert not (root / "drkg-fixture").exists() and _kept_files(root) == []


def test_a_reader_error_names_the_file_and_line_and_keeps_nothing(tmp_path, served):
    server, built = served
    bad = b"Compound::DB01586\tGNBR::T::Compound:Disease\tDisease::MESH:C535932\nno-type\tGNBR::T::Compound:Disease\tx\n"
    files = {"drkg.tar.gz": _tar_gz({"drkg.tsv": bad})}
    entry = {"name": "broken-drkg", "format": "drkg", "license": "test", "files": [
        {"url": f"{server.base_url}/broken/drkg.tar.gz", "sha256": hashlib.sha256(files["drkg.tar.gz"]).hexdigest()}]}
    server.files["/broken/drkg.tar.gz"] = files["drkg.tar.gz"]
    done, root = _get_with(tmp_path, [entry], "broken-drkg")
    assert done.exit_code == 1 and "drkg.tsv, line 2" in done.output and "'Type::id'" in done.output, done.output
    assert not (root / "broken-drkg").exists()


def test_labels_are_read_as_exact_strings(tmp_path, served):
    server, _ = served
    text = "NA\tT\tnull\nnan\tT\tNA\nNA\tP\tnan\nnull\tP\tNA\n"
    files = {name: text.encode() for name in ("train.tsv", "valid.tsv", "test.tsv")}
    for name, data in files.items():
        server.files[f"/na/{name}"] = data
    entry = {"name": "na-kg", "format": "pharmkg8k", "license": "test", "files": [
        {"url": f"{server.base_url}/na/{name}", "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()]}
    done, _ = _get_with(tmp_path, [entry], "na-kg")
    assert done.exit_code == 0, done.output
    nodes = (Path(done.stdout.strip()) / "graph" / "nodes.csv").read_text().split()
    assert sorted(nodes[::2]) == ["NA", "nan", "null"]


def test_the_built_in_entries_pin_what_each_publisher_publishes():
    by_name = {entry.name: entry for entry in NATIVE_DATASETS}
    assert sorted(by_name) == sorted(BUILDERS)
    hetionet_edges = by_name["hetionet"].remote_files[0]
    assert hetionet_edges.sha256 == "611f0411ac666be4e0270e54bbca67407e14720bfc3099311f0f5eec25c5a947"
    assert hetionet_edges.size == 12_401_407
    assert by_name["primekg"].remote_files[0].md5 == "aac8191d4fbc5bf09cdf8c3c78b4e75f"
    assert by_name["primekg"].remote_files[0].size == 981_751_236
    assert by_name["pharmkg8k"].remote_files[0].git_sha1 == "9047084dd741eab80499c19a5d11d80143d99906"
    assert by_name["hetionet"].counts["check"] == {"nodes": 47_031, "rows": 2_250_197}
    assert by_name["ogbl-biokg"].counts["check"]["entities"] == 93_773
    assert lookup("HetioNet").name == "hetionet"
    done = CliRunner().invoke(main, ["datasets", "list", "--format", "json"])
    listed = {row["name"] for row in json.loads(done.output)}
    assert set(BUILDERS) <= listed
    done = CliRunner().invoke(main, ["split", "rand", "--dataset", "hetionte", "--output", "x"])
    assert done.exit_code == 1 and "did you mean hetionet" in done.output, done.output


def test_a_graph_without_an_official_split_says_how_to_split_it_before_any_download(tmp_path, lab):
    server, _, _, _ = lab
    before = len(server.requests)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", "drkg-fixture", "--model", "popularity"])
    assert done.exit_code == 1 and "split rand --dataset drkg-fixture" in done.output, done.output
    assert len(server.requests) == before and not (tmp_path / "data" / "drkg-fixture").exists()


def test_the_built_in_checksums_refuse_other_bytes_under_the_published_names(tmp_path, served):
    """A mirror serving anything but the publisher's bytes: the pinned sha256 (Hetionet), md5 and
    size (PrimeKG) and git blob id (PharmKG-8k's train.tsv) refuse it; nothing is kept."""
    server, built = served
    hetionet_files, _, _ = built["hetionet"]
    pharmkg_files, _, _ = built["pharmkg8k"]
    primekg_files, _, _ = built["primekg"]
    for name, data in {**hetionet_files, **pharmkg_files, **primekg_files}.items():
        server.files[f"/mirror/{name}"] = data
    server.files["/mirror/hetionet-v1.0-edges.sif.gz"] = bytes(12_401_407)  # the published size, other bytes
    root = tmp_path / "data"
    for name, expected in (("hetionet", "expected 611f0411"), ("pharmkg8k", "git blob id"),
                           ("primekg", "bytes, expected 981751236")):
        done = CliRunner().invoke(main, ["datasets", "get", name, "--root", root, "--mirror",
                                         f"{server.base_url}/mirror", "--no-progress"])
        assert done.exit_code == 1 and expected in done.output and "discarded" in done.output, done.output
        assert not (root / name).exists()
    assert _kept_files(root) == []


def test_without_a_published_checksum_the_first_verified_download_is_pinned(tmp_path, served, monkeypatch, caplog):
    import dataclasses
    import logging
    import shutil

    from openbench.datasets import published as registry

    server, built = served
    files, check, _ = built["biokg"]
    entry = dataclasses.replace(registry.REGISTRY["biokg"], counts={"check": check})
    monkeypatch.setitem(registry.REGISTRY, "biokg", entry)
    server.files["/pins/biokg.zip"] = files["biokg.zip"]
    root = tmp_path / "data"
    with caplog.at_level(logging.WARNING):
        registry.get("biokg", root, mirror=f"{server.base_url}/pins", progress=False)
    pins = json.loads((root / "openbench-checksums.json").read_text())
    assert pins == {"biokg": hashlib.sha256(files["biokg.zip"]).hexdigest()}
    assert "no published checksum" in caplog.text
    shutil.rmtree(root / "biokg")
    server.files["/pins/biokg.zip"] = files["biokg.zip"][:-10] + b"0123456789"  # the release changed
    with pytest.raises(registry.DatasetError, match="differs from the one recorded"):
        registry.get("biokg", root, mirror=f"{server.base_url}/pins", progress=False)
    assert not (root / "biokg").exists() and not list((root / ".downloads").rglob("biokg.zip"))


@pytest.mark.parametrize("change, expected", [
    ({"format": "tsv"}, "format 'tsv'"), ({"files": []}, "files is empty"),
    ({"files": [{"url": "https://example.org/a.tsv"}]}, "url and sha256"),
    ({"files": [{"url": "https://example.org/a.tsv", "sha256": "0" * 64, "md5": "x"}]}, "nothing else"),
    ({"files": [{"url": "https://example.org/a.tsv", "sha256": "0" * 64}] * 2}, "same file name"),
    ({"files": [{"url": "https://example.org/", "sha256": "0" * 64}]}, "file name"),
    ({"files": [{"url": "https://example.org/a.tsv", "sha256": "0" * 64, "size": 0}]}, "files.size"),
    ({"url": "https://example.org/a.tsv", "sha256": "0" * 64}, "not both"),
    ({"counts": {"check": {"rows": -1}}}, "counts.check"), ({"layout": "samples"}, "layout and format differ"),
    ({"format": "samples"}, "one zip archive")])
def test_registry_entries_of_published_kg_formats_are_checked(tmp_path, change, expected):
    entry = {"name": "mine", "format": "drkg", "license": "CC0",
             "files": [{"url": "https://example.org/drkg.tar.gz", "sha256": "0" * 64}], **change}
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([entry]))
    done = CliRunner().invoke(main, ["datasets", "--registry", path, "list"])
    assert done.exit_code == 1 and expected in done.output and "entry 1" in done.output, done.output


def test_split_rand_takes_a_dataset_or_the_graph_files_not_both(tmp_path, lab):
    _, _, _, run = lab
    folder = Path(run("datasets", "get", "hetionet-fixture", "--no-progress").strip())
    both = CliRunner().invoke(main, ["split", "rand", "--dataset", "hetionet-fixture", "--edges",
                                     folder / "graph" / "edges.csv", "--output", tmp_path / "s"])
    assert both.exit_code == 2 and "not both" in both.output, both.output
    neither = CliRunner().invoke(main, ["split", "rand", "--output", tmp_path / "s"])
    assert neither.exit_code == 2 and "--dataset NAME" in neither.output, neither.output
    by_folder = CliRunner().invoke(main, ["split", "rand", "--dataset", folder, "--output", tmp_path / "s2"])
    assert by_folder.exit_code == 0, by_folder.output
    plain = CliRunner().invoke(main, ["split", "rand", "--dataset", tmp_path, "--output", tmp_path / "s3"])
    assert plain.exit_code == 1 and "not a converted graph" in plain.output, plain.output
    # the converted graph's relations are checked when split from its files
    edges = folder / "graph" / "edges.csv"
    edges.write_text(edges.read_text() + "Gene::1\tGENE_GENE\tGene::10\t\tx\n")
    bad = CliRunner().invoke(main, ["split", "rand", "--dataset", folder, "--output", tmp_path / "s4"])
    assert bad.exit_code == 1 and "unknown relation 'GENE_GENE'" in bad.output and "graph_info.json" in bad.output, \
        bad.output


def test_an_archive_member_outside_the_dataset_folder_is_refused(tmp_path, served):
    server, _ = served
    evil = _tar_gz({"drkg.tsv": b"Compound::DB1\tGNBR::T::Compound:Disease\tDisease::D1\n", "../escaped.tsv": b"x\n"})
    server.files["/evil/drkg.tar.gz"] = evil
    entry = {"name": "evil-drkg", "format": "drkg", "license": "test",
             "files": [{"url": f"{server.base_url}/evil/drkg.tar.gz", "sha256": hashlib.sha256(evil).hexdigest()}]}
    done, root = _get_with(tmp_path, [entry], "evil-drkg")
    assert done.exit_code == 1 and "would unpack outside the dataset folder" in done.output, done.output
    assert not (root / "evil-drkg").exists() and not (root / "escaped.tsv").exists()
    assert not list(tmp_path.rglob("escaped.tsv"))


def test_the_audit_reads_a_published_kg_by_name_and_finds_what_its_reader_fixed(tmp_path, lab):
    """PrimeKG's converted graph holds each swapped pair once: its audit, by name, finds no reverse
    duplicate left; a copy's folder is audited through its graph/, with its own relations."""
    _, built, _, run = lab
    run("datasets", "get", "primekg-fixture", "--no-progress")
    report = json.loads(run("audit", "primekg-fixture", "--format", "json"))
    graph = json.loads((tmp_path / "data" / "primekg-fixture" / "graph" / "graph_info.json").read_text())
    assert report["input"]["path"].endswith("graph") and report["input"]["triples"]["graph"] == graph["counts"]["edges"]
    assert report["reverse_duplicates"]["count"] == 0 and report["duplicates"]["count"] == 0
    copy = run("datasets", "get", "drkg-fixture", "--no-progress").strip()
    drkg = json.loads(run("audit", copy, "--format", "json"))
    drkg_graph = json.loads((Path(copy) / "graph" / "graph_info.json").read_text())
    assert drkg["input"]["relations"] == len(drkg_graph["relations"]) == built["drkg"][1]["relations"] - 1  # 1 refused


def _undirected_split(folder, declared):
    folder.mkdir()
    (folder / "train_sample.csv").write_text("c\tr\ta\nb\tq\tc\n")
    (folder / "test_sample.csv").write_text("a\tr\tb\n")
    if declared is not None:
        (folder / "split_info.json").write_text(json.dumps({"dataset": {"undirected_relations": declared}}))
    return folder


def test_an_undirected_relations_edge_is_a_known_answer_in_both_orientations(tmp_path):
    """Training holds (c, r, a) once; r is undirected, so (a, r, c) is known too and the tail query
    (a, r, ?) of the test triple (a, r, b) filters c. DistMult in 1-d with entities a, b, c = 1, 2, 3:
    tail query scores 1, 2, 3 (b ranks 2 unfiltered, 1 with c filtered); head query (?, r, b) scores
    2, 4, 6 (a ranks 3 either way: nothing known joins r to b but the answer)."""
    import openbench

    model = openbench.embedding_model("DistMult", np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [1.0]]))
    both = openbench.evaluate(str(_undirected_split(tmp_path / "u", ["r"])), model, progress=False)
    once = openbench.evaluate(str(_undirected_split(tmp_path / "d", None)), model, progress=False)
    assert once.metric("tail.realistic.mrr") == pytest.approx(1 / 2) and once.metric("head.realistic.mrr") == \
        pytest.approx(1 / 3)
    assert both.metric("tail.realistic.mrr") == pytest.approx(1.0) and both.metric("head.realistic.mrr") == \
        pytest.approx(1 / 3)
    assert both.protocol.to_dict()["undirected_relations"] == ["r"] and "undirected_relations" not in \
        once.protocol.to_dict()
    unfiltered = openbench.evaluate(str(_undirected_split(tmp_path / "n", ["r"])), model, filter_sets=[],
                                    progress=False)
    assert unfiltered.metric("tail.realistic.mrr") == pytest.approx(1 / 2)
    assert "undirected_relations" not in unfiltered.protocol.to_dict()
    with pytest.raises(InputError, match="undirected_relations must be a list"):
        openbench.evaluate(str(_undirected_split(tmp_path / "bad", "r")), model, progress=False)


def test_a_split_of_a_published_kg_filters_its_undirected_relations_both_ways(tmp_path, lab):
    _, _, _, run = lab
    _, info, record, _ = _get_split_evaluate(tmp_path, run, "primekg")
    assert record["protocol"]["undirected_relations"] == sorted(
        name for name in info["dataset"]["undirected_relations"] if name in info["split"]["per_relation"])


def test_a_verification_record_without_its_official_split_is_refused(tmp_path, lab):
    _, _, _, run = lab
    folder = Path(run("datasets", "get", "pharmkg8k-fixture", "--no-progress").strip())
    marker = json.loads((folder / MARKER).read_text())
    marker["evaluation"] = "../elsewhere"
    (folder / MARKER).write_text(json.dumps(marker))
    done = CliRunner().invoke(main, ["evaluate", "--dataset", "pharmkg8k-fixture", "--model", "popularity"])
    assert done.exit_code == 1 and "names no official split" in done.output, done.output


def test_an_unreadable_tar_or_a_split_archive_given_as_a_graph_is_refused(tmp_path, served):
    server, _ = served
    garbage = b"\x1f\x8b not a tar archive at all"
    server.files["/garbage/drkg.tar.gz"] = garbage
    entry = {"name": "garbage-drkg", "format": "drkg", "license": "test",
             "files": [{"url": f"{server.base_url}/garbage/drkg.tar.gz", "sha256": hashlib.sha256(garbage).hexdigest()}]}
    done, root = _get_with(tmp_path, [entry], "garbage-drkg")
    assert done.exit_code == 1 and "not a readable tar archive" in done.output, done.output
    assert not (root / "garbage-drkg").exists() and _kept_files(root) == []
    published_split = CliRunner().invoke(main, ["split", "rand", "--dataset", "HQ_DIR", "--output", tmp_path / "s"])
    assert published_split.exit_code == 1 and "is a published split, not a graph" in published_split.output


def test_a_damaged_split_info_is_an_error_naming_it(tmp_path):
    import openbench

    folder = _undirected_split(tmp_path / "u", ["r"])
    (folder / "split_info.json").write_text("[1, 2]")
    model = openbench.embedding_model("DistMult", np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [1.0]]))
    with pytest.raises(InputError, match="expected a JSON object") as info:
        openbench.evaluate(str(folder), model, progress=False)
    assert info.value.path.endswith("split_info.json")


# -- issue 51: TxGNN's question on PrimeKG, by name ----------------------------------------------------

DRUG_DISEASE = "indication,contraindication,off-label use"


def _graph_positives(folder):
    return sorted(_triples(folder / "graph" / "edges.csv"))


@pytest.mark.parametrize("selection", [
    ("--node-type", "disease", "--fraction", "0.5"),
    ("--subtree", "disease::MONDO::2816", "--hierarchy-relation", "disease_disease", "--hierarchy-direction",
     "parent-child")])
def test_primekg_entity_split_by_name_holds_out_diseases_treatments(tmp_path, lab, selection):
    """``split entity --dataset primekg --node-type disease --relations indication,contraindication,
    off-label use`` (TxGNN's main split) and the same by a subtree of PrimeKG's own disease
    hierarchy (its disease_disease edges point parent to child): the split's invariants hold, the
    subtree holds the root and its child, and the baselines evaluate with the question recorded."""
    from tests.splits.reference import check_entity_invariants, heldout_roles

    _, _, _, run = lab
    folder = Path(run("datasets", "get", "primekg-fixture", "--no-progress").strip())
    split = tmp_path / "entity"
    printed = run("split", "entity", "--dataset", "primekg-fixture", *selection, "--relations", DRUG_DISEASE,
                  "--output", split, "--seed", 4)
    assert "held out" in printed
    roles, train, _, test = check_entity_invariants(split, _graph_positives(folder), DRUG_DISEASE.split(","))
    assert test and all(r in DRUG_DISEASE.split(",") for _, r, _ in test)
    if selection[0] == "--subtree":
        assert roles["test"] == {"disease::MONDO::2816", "disease::MONDO::4"}
    info = json.loads((split / "split_info.json").read_text())
    assert info["dataset"]["name"] == "primekg-fixture" and info["kind"] == "entity"
    for model in ("popularity", "neighbours"):
        record_path = tmp_path / f"{model}.json"
        run("evaluate", "--dataset", split, "--model", model, "--no-progress", "--output", record_path)
        record = json.loads(record_path.read_text())
        assert record["protocol"]["split"]["kind"] == "entity"
        assert record["protocol"]["split"]["relations"] == sorted(DRUG_DISEASE.split(","))
    report = json.loads(run("audit", split, "--format", "json"))
    assert report["split"]["count"] == 0
    del heldout_roles


def test_pharmkg8k_problems_are_each_the_set_they_name(tmp_path):
    """Each key of PharmKG-8k's ``problems`` against a set computation on planted files whose
    overlaps all differ in size (train∩test 2, test∩valid 3, test reversed in valid 1, …): a key
    counting another set (e.g. test∩valid as train∩test) would not match."""
    from openbench.datasets.published.native.pharmkg import read_pharmkg8k

    def line(h, r, t):
        return f"{h}\t{r}\t{t}"

    train = [line(f"A{i}", "r1", f"B{i}") for i in range(10)] + [line("X", "r2", "X")]
    test = ([line("A0", "r1", "B0"), line("A1", "r1", "B1")]  # in train
            + [line(f"C{i}", "r1", f"D{i}") for i in range(3)]  # also in valid
            + [line("E0", "r2", "F0"), line("E0", "r2", "F0")]  # repeated; its reverse in valid
            + [line("G0", "r1", "G0")] + [line("A2", "r3", "NEW")])  # a self-loop; an unseen entity
    valid = [line(f"C{i}", "r1", f"D{i}") for i in range(3)] + [line("F0", "r2", "E0"), line("A3", "r1", "B4")]
    for name, lines in (("train.tsv", train), ("valid.tsv", valid), ("test.tsv", test)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    problems = read_pharmkg8k(tmp_path).problems
    as_set = {name: {tuple(text.split("\t")) for text in lines} for name, lines in
              (("train", train), ("valid", valid), ("test", test))}
    seen = {e for h, _, t in as_set["train"] for e in (h, t)}
    expected = {"repeated_lines_train": 0, "repeated_lines_valid": 0, "repeated_lines_test": 1,
                "triples_in_test_and_valid": len(as_set["test"] & as_set["valid"]),
                "test_triples_reversed_in_valid": len({(h, r, t) for h, r, t in as_set["test"]
                                                       if (t, r, h) in as_set["valid"]}),
                "triples_in_train_and_test": len(as_set["test"] & as_set["train"]),
                "test_triples_with_entities_unseen_in_train": len({(h, r, t) for h, r, t in as_set["test"]
                                                                   if h not in seen or t not in seen}),
                "self_loops_train": 1, "self_loops_valid": 0, "self_loops_test": 1}
    assert (expected["triples_in_train_and_test"], expected["triples_in_test_and_valid"],
            expected["test_triples_reversed_in_valid"]) == (2, 3, 1)
    assert {key: problems[key] for key in expected} == expected
    assert set(problems) == set(expected)


def test_biokg_reads_its_same_kind_interactions_as_undirected(tmp_path):
    """BioKG's links_description.txt gives each file's format; the interactions between two
    entities of one kind (<uniprot_acc> PPI <uniprot_acc>, <drugbank_id> DDI <drugbank_id>) are the
    symmetric ones, stored once: the reader declares exactly those undirected, so a split filters a
    test triple's reverse copy."""
    from openbench.datasets.published.native.biokg import FILE, read_biokg

    described = (KGS / "biokg" / "links_description.txt").read_text(encoding="utf-8").splitlines()
    formats = [described[i + 1].split() for i, line in enumerate(described[:-1]) if line.startswith("# Format")]
    same_kind = {relation for head, relation, tail in formats if head == tail}
    assert same_kind == {"PPI", "DDI"}
    rows = ["P1\tPPI\tP2", "DB1\tDDI\tDB2", "DB1\tDPI\tP1", "P1\tPROTEIN_DISEASE_ASSOCIATION\tD1"]
    (tmp_path / FILE).write_text("\n".join(rows) + "\n")
    graph = read_biokg(tmp_path)
    assert set(graph.undirected) == same_kind


def test_a_command_given_a_name_never_downloads_it_and_says_what_to_run(tmp_path, lab):
    """Issue 66: `audit primekg` and `evaluate --dataset primekg` started a 982 MB download on their
    own. Only `datasets get` downloads; the others name it, and the server sees no request."""
    server, _, _, _ = lab
    before = len(server.requests)
    for command in (["audit", "primekg-fixture"], ["split", "rand", "--dataset", "primekg-fixture", "--output",
                                                   str(tmp_path / "s")],
                    ["evaluate", "--dataset", "pharmkg8k-fixture", "--model", "popularity"],
                    ["train", "--dataset", "pharmkg8k-fixture", "--model", "DistMult", "--output", str(tmp_path / "m")]):
        done = CliRunner().invoke(main, command)
        assert done.exit_code == 1, (command, done.output)
        assert "openbench datasets get" in done.output and "nothing was downloaded" in done.output, done.output
        assert len(done.output.strip().splitlines()) == 1
    assert len(server.requests) == before and not (tmp_path / "data" / "primekg-fixture").exists()


def test_a_local_copy_of_a_catalogue_file_is_verified_and_converted_offline(tmp_path, lab):
    """`datasets get NAME --file PATH` and a `file://` mirror take the user's copy, checked against
    the catalogue's checksum, with no request to the network; the result equals the download's."""
    server, built, registry_file, run = lab
    files, _, _ = built["primekg"]
    (name, data), = files.items()
    mine = tmp_path / "downloads" / "my-kg-copy.csv"
    mine.parent.mkdir()
    mine.write_bytes(data)
    before = len(server.requests)
    folder = Path(run("datasets", "get", "primekg-fixture", "--file", mine, "--no-progress").strip())
    assert len(server.requests) == before and mine.read_bytes() == data  # the user's file only read
    local = (folder / "graph" / "edges.csv").read_bytes()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / name).write_bytes(data)
    other_root = tmp_path / "other"
    done = CliRunner().invoke(main, ["datasets", "get", "primekg-fixture", "--root", str(other_root), "--mirror",
                                     shared.as_uri(), "--no-progress"])
    assert done.exit_code == 0, done.output
    assert len(server.requests) == before
    assert (Path(done.stdout.strip()) / "graph" / "edges.csv").read_bytes() == local
    downloaded = CliRunner().invoke(main, ["datasets", "get", "primekg-fixture", "--root", str(tmp_path / "net"),
                                           "--no-progress"])
    assert downloaded.exit_code == 0
    assert (Path(downloaded.stdout.strip()) / "graph" / "edges.csv").read_bytes() == local


def test_a_local_copy_that_is_not_the_published_file_is_refused(tmp_path, lab):
    _, built, _, _ = lab
    files, _, _ = built["primekg"]
    (_, data), = files.items()
    altered = tmp_path / "kg.csv"
    altered.write_bytes(data[:-10] + b"0123456789")
    done = CliRunner().invoke(main, ["datasets", "get", "primekg-fixture", "--file", str(altered), "--no-progress"])
    assert done.exit_code == 1 and str(altered) in done.output and "it is not the published file" in done.output
    assert not (tmp_path / "data" / "primekg-fixture").exists() and altered.read_bytes().endswith(b"0123456789")
    many = CliRunner().invoke(main, ["datasets", "get", "hetionet-fixture", "--file", str(altered), "--file",
                                     str(altered), "--no-progress"])
    assert many.exit_code == 1 and "has no file named" in many.output
