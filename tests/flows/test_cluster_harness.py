"""The harness of the cluster tests (tests/cluster_harness.py) does what they rely on:
workers that cannot see the hidden folders, and one object store that they and the test
share."""

from __future__ import annotations

import os

import polars as pl
import pytest
from cluster_harness import blind_dask_cluster, s3_server
from distributed import Client

pytestmark = pytest.mark.services  # a moto server, a Dask scheduler and two workers


def test_blind_workers_see_no_hidden_file_and_share_the_object_store(tmp_path, monkeypatch):
    def write_squares(url: str) -> int:
        """On a worker: a Parquet file to the object store; the worker's pid. A local
        function, so that it travels by value: the workers cannot import this module (and
        distributed pickles a submitted task's function by name whenever pickle can)."""
        pl.DataFrame({"n": [1, 2, 3], "square": [1, 4, 9]}).write_parquet(url)
        return os.getpid()

    secret = tmp_path / "hidden" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("only on this machine")
    with (
        s3_server() as s3,
        blind_dask_cluster([secret.parent], s3.env, logs=tmp_path / "logs") as address,
        Client(address, timeout=10) as client,
    ):
        url = f"{s3.bucket('shared')}/x.parquet"
        seen = client.run(os.path.exists, str(secret))
        pids = client.run(os.getpid)
        writer = client.submit(write_squares, url).result(timeout=30)
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        read_back = pl.read_parquet(url)
    assert secret.exists() and list(seen.values()) == [False, False]
    assert read_back.to_dict(as_series=False) == {"n": [1, 2, 3], "square": [1, 4, 9]}
    assert writer in pids.values()
    assert len({*pids.values(), os.getpid()}) == 3
