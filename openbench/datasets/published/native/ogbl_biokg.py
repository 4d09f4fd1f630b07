"""ogbl-biokg: the OGB folder of ``biokg.zip`` (``raw/num-node-dict.csv.gz``,
``split/random/{train,valid,test}.pt``), read with :mod:`openbench.datasets.ogb`'s weights-only
loader.

Entity ids are local to their node type (index 0 exists in all five types), so a node is
``<type>:<local id>`` here, as in the OGB loader's labels; its global integer ids (for models
trained with OGB's code) follow OGB's sorted type order. The official split is kept: evaluating
``ogbl-biokg`` by name reads the OGB folder itself. Relations joining two entities of one type
(protein-protein, drug-drug, function-function) are symmetric and stored in both directions (OGB's
description), so they are read as undirected: for ``split rand`` the two copies of such an edge
are one fact.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np
import polars as pl

from openbench.datasets.published.native.graph import NativeGraph
from openbench.errors import InputError

__all__ = ["read_ogbl_biokg"]


def _split_edges(path: Path) -> pl.DataFrame:
    from openbench.datasets.ogb import load_split_file  # torch: only when an OGB folder is read

    data = load_split_file(path)
    for key in ("head_type", "tail_type"):
        if key not in data:
            raise InputError(f"no {key!r} array: expected ogbl-biokg's typed split", path)
    columns = {key: np.asarray(data[key]) for key in ("head", "relation", "tail", "head_type", "tail_type")}
    rows = len(columns["head"])
    if any(values.shape != (rows,) for values in columns.values()):
        raise InputError("head, relation, tail, head_type and tail_type must be 1-d arrays of one length", path)
    frame = pl.DataFrame({key: values.astype(str) if key.endswith("type") else values.astype(np.int64)
                          for key, values in columns.items()})
    return frame.select(pl.concat_str([pl.col("head_type"), pl.col("head").cast(pl.String)], separator=":").alias("h"),
                        pl.concat_str([pl.lit("relation"), pl.col("relation").cast(pl.String)], separator=":").alias("r"),
                        pl.concat_str([pl.col("tail_type"), pl.col("tail").cast(pl.String)], separator=":").alias("t"),
                        "head_type", "tail_type", "head", "tail")


def read_ogbl_biokg(folder: Path) -> NativeGraph:
    from openbench.datasets.ogb import OGB_SPLITS, num_node_dict

    counts = num_node_dict(folder)
    if counts is None:
        raise InputError("no raw/num-node-dict.csv.gz: expected the OGB folder of biokg.zip", folder / "raw")
    splits: Dict[str, pl.DataFrame] = {}
    for split, name in OGB_SPLITS.items():
        path = folder / "split" / "random" / name
        frame = _split_edges(path)
        for side in ("head", "tail"):
            limits = pl.DataFrame({f"{side}_type": list(counts), "_count": list(counts.values())})
            checked = frame.join(limits, on=f"{side}_type", how="left")
            if checked.filter(pl.col("_count").is_null() | (pl.col(side) >= pl.col("_count"))).height:
                raise InputError(f"{side} ids beyond their type's count in raw/num-node-dict.csv.gz (or an unknown "
                                 "type)", path)
        splits[split] = frame
    nodes = pl.concat([pl.DataFrame({"id": [f"{kind}:{i}" for i in range(count)], "node_type": [kind] * count},
                                    schema={"id": pl.String, "node_type": pl.String})
                       for kind, count in sorted(counts.items())])
    edges = pl.concat([frame for frame in splits.values()])
    same_type = set(edges.filter(pl.col("head_type") == pl.col("tail_type")).get_column("r").unique().to_list())
    return NativeGraph(nodes=nodes, edges=edges.select("h", "r", "t"), undirected=frozenset(same_type),
                       id_scheme="<type>:<local id> (OGB's per-type ids; global ids in OGB's sorted type order)",
                       counts={**{split: frame.height for split, frame in splits.items()}, "entities": nodes.height},
                       evaluation="native",
                       notes=["the official split (split/random) is evaluated as published; same-type relations "
                              "are symmetric and read as undirected"])
