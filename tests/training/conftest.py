"""Fixtures of the training tests; the helpers they use live in trainkit.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"  # MiniLM and its tokenizer load from the installed package
sys.path.insert(0, str(Path(__file__).parent))  # trainkit (tests run with --import-mode=importlib)
# the repository root before tests/ (pythonpath), so that a bare `pytest` finds the packages
# data_catalog and training, not the namespaces of the test folders named like them
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

import trainkit  # noqa: E402


@pytest.fixture(autouse=True)
def _offline_and_threads(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    yield
    # train() sets both for the whole process; later tests get them back as they were
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)


@pytest.fixture
def project(tmp_path, sms_spam) -> trainkit.Project:
    """A version of 200 real SMS messages and a config training the tiny causal LM on it."""
    return trainkit.sms_project(tmp_path, sms_spam, 200, trainkit.tiny())
