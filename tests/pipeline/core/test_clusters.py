"""Components across partitions: large-star / small-star rounds, each step on one node
partition's edges, label every node with the smallest node of its component, as union-find
over every edge at once does, in few rounds."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from helpers import star_rounds

from pipeline.core import clusters


def graph(seed: int) -> pl.DataFrame:
    """Random edges over 64-bit node ids, with the shapes duplicates make: pairs, a long
    chain (A~B~C~…, the hardest case for label propagation), one large star and random links
    between them."""
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(0, 2**64 - 1, size=3_000, dtype=np.uint64))
    rng.shuffle(ids)
    chain = ids[:400]
    star = ids[400:900]
    rest = ids[900:]
    left = [chain[:-1], np.full(len(star) - 1, star[0]), rest[0::2][: len(rest) // 2]]
    right = [chain[1:], star[1:], rest[1::2][: len(rest) // 2]]
    linked = rng.choice(ids, size=(300, 2))
    left.append(linked[:, 0])
    right.append(linked[:, 1])
    return pl.DataFrame(
        {"node": np.concatenate(left), "neighbor": np.concatenate(right)}, schema=clusters.EDGES
    )


@pytest.mark.parametrize("partitions", [1, 3, 7])
@pytest.mark.parametrize("seed", [0, 1])
def test_star_rounds_label_every_node_as_union_find_does(partitions, seed):
    edges = graph(seed)
    nodes, smallest = clusters.components(edges["node"].to_numpy(), edges["neighbor"].to_numpy())
    expected = pl.DataFrame({"node": nodes, "_component": smallest}, schema=clusters.LABELS)
    labels, rounds = star_rounds(edges, partitions)
    assert labels.sort("node").equals(expected)
    assert expected["_component"].n_unique() < len(nodes) / 2  # real components, not singletons
    assert rounds <= 12  # a chain of 400 nodes: log-many rounds, not 400


def test_a_star_forest_is_the_fixed_point():
    star = pl.DataFrame({"node": [5, 9, 7], "neighbor": [2, 2, 2]}, schema=clusters.EDGES)
    hooked, changed = clusters.small_star(star)
    assert not changed and hooked.sort("node").equals(star.sort("node"))
    hooked, changed = clusters.large_star(clusters.both_ways(star))
    assert not changed and hooked.sort("node").equals(star.sort("node"))
    # a path 1-2-3 is not: 3 hooks onto 1
    path = pl.DataFrame({"node": [2, 3], "neighbor": [1, 2]}, schema=clusters.EDGES)
    hooked, changed = clusters.large_star(clusters.both_ways(path))
    assert changed and sorted(hooked.iter_rows()) == [(2, 1), (3, 1)]
