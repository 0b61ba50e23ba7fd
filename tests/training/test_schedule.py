"""The learning-rate schedule (linear warmup, cosine decay to a floor) and the AdamW groups."""

from __future__ import annotations

import math

import pytest
from trainkit import sms_project, tiny

from training.loop import lr_multiplier
from training.models import CausalLM, MiniLMClassifier, parameter_groups
from training.run import train


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.0),
        (5, 0.5),
        (9, 0.9),
        (10, 1.0),
        (35, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4))),
        (60, 0.55),
        (110, 0.1),
        (150, 0.1),  # past the end: stays at the floor
    ],
)
def test_lr_multiplier_by_value(step, expected):
    assert lr_multiplier(step, warmup=10, total=110, min_ratio=0.1) == pytest.approx(
        expected, abs=1e-12
    )


def test_lr_multiplier_without_warmup_starts_at_the_peak_and_decays_to_zero():
    assert lr_multiplier(0, warmup=0, total=4, min_ratio=0.0) == 1.0
    assert lr_multiplier(2, warmup=0, total=4, min_ratio=0.0) == pytest.approx(0.5)
    assert lr_multiplier(4, warmup=0, total=4, min_ratio=0.0) == pytest.approx(0.0, abs=1e-15)
    values = [lr_multiplier(s, 3, 20, 0.2) for s in range(21)]
    assert values[:4] == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert all(a >= b for a, b in zip(values[3:], values[4:], strict=False))


def test_a_run_uses_lr_times_the_multiplier_at_every_step(tmp_path, sms_spam):
    section = tiny(lr=1e-3, max_steps=12, warmup_steps=3, min_lr_ratio=0.1, log_every=1)
    result = train(sms_project(tmp_path, sms_spam, 120, section).config)
    steps = result.manifest["plan"]["steps"]
    assert (steps["total"], steps["warmup"]) == (12, 3)
    logged = [entry for entry in result.manifest["metrics"]["history"] if "lr" in entry]
    assert [entry["step"] for entry in logged] == list(range(1, 13))
    for entry in logged:  # step s (counted from 1) is optimizer step s - 1 of the scheduler
        assert entry["lr"] == pytest.approx(1e-3 * lr_multiplier(entry["step"] - 1, 3, 12, 0.1))
    assert logged[0]["lr"] == 0.0 and logged[3]["lr"] == pytest.approx(1e-3)


def test_warmup_ratio_is_a_share_of_all_steps(tmp_path, sms_spam):
    section = tiny(max_steps=8, warmup_ratio=0.25, eval_every=8, checkpoint_every=100)
    result = train(sms_project(tmp_path, sms_spam, 120, section).config)
    assert result.manifest["plan"]["steps"]["warmup"] == 2
    lrs = [e["lr"] for e in result.manifest["metrics"]["history"] if "lr" in e]
    assert lrs[:3] == pytest.approx([0.0, 2.5e-5, 5e-5])


def assert_groups(model, groups, weight_decay):
    decay, no_decay = groups
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (weight_decay, 0.0)
    trainable = [p for p in model.parameters() if p.requires_grad]
    grouped = decay["params"] + no_decay["params"]
    assert len(grouped) == len(trainable) == len({id(p) for p in grouped})
    assert {id(p) for p in grouped} == {id(p) for p in trainable}
    named = {id(p): name for name, p in model.named_parameters()}
    decayed = {named[id(p)] for p in decay["params"]}
    exempt = {named[id(p)] for p in no_decay["params"]}
    assert all(p.ndim >= 2 for p in decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    return decayed, exempt


def test_parameter_groups_decay_matrices_only():
    model = CausalLM(vocab_size=50, max_length=16, d_model=8, layers=2, heads=2, dropout=0.0)
    decayed, exempt = assert_groups(model, parameter_groups(model, 0.01), 0.01)
    assert {
        "tokens.weight",
        "positions.weight",
        "blocks.0.qkv.weight",
        "blocks.1.mlp.0.weight",
    } <= (decayed)
    assert {
        "blocks.0.qkv.bias",
        "blocks.0.norm1.weight",
        "blocks.0.norm1.bias",
        "blocks.1.mlp.2.bias",
        "norm.weight",
        "norm.bias",
    } <= exempt
    assert not any(name.endswith("bias") or "norm" in name for name in decayed)


def test_parameter_groups_of_minilm_with_a_frozen_base_hold_the_head_only():
    model = MiniLMClassifier(num_labels=2, dropout=0.1, freeze_base=True)
    decayed, exempt = assert_groups(model, parameter_groups(model, 0.05), 0.05)
    assert (decayed, exempt) == ({"head.weight"}, {"head.bias"})
    full = MiniLMClassifier(num_labels=2, dropout=0.1, freeze_base=False)
    decayed, exempt = assert_groups(full, parameter_groups(full, 0.05), 0.05)
    assert "encoder.embeddings.LayerNorm.weight" in exempt
    assert "encoder.encoder.layer.0.attention.self.query.bias" in exempt
    assert "encoder.embeddings.word_embeddings.weight" in decayed
