"""The secret detector: every type found at its exact span, look-alikes left alone."""

from __future__ import annotations

import random

import polars as pl
import pytest
from credential_factory import (
    HARD_NEGATIVE_BUILDERS,
    SECRET_BUILDERS,
    hard_negative_sample,
    secret_sample,
)

from pipeline.secrets import SECRET_TYPES, find_secrets, mask_secrets, shannon_entropy


def _findings(texts: list[str | None]) -> list[dict]:
    return find_secrets(pl.Series(texts, dtype=pl.String)).to_dicts()


def test_every_type_has_a_builder():
    assert set(SECRET_BUILDERS) == set(SECRET_TYPES)
    assert len(SECRET_TYPES) == 25


@pytest.mark.parametrize("kind", SECRET_TYPES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_type_is_found_at_its_exact_span_and_masked(kind, seed):
    sample = secret_sample(kind, random.Random(seed))
    # Non-ASCII text before the secret: offsets are characters, not bytes.
    prefix = "naïve café — "
    text = prefix + sample.text
    start, end = len(prefix) + sample.start, len(prefix) + sample.end

    findings = _findings(["nothing here", text])

    assert findings == [
        {"index": 1, "type": kind, "start": start, "end": end, "lead": sample.value[:4]}
    ]
    masked = mask_secrets(text, findings)
    assert masked == text[:start] + f"<SECRET:{kind}>" + text[end:]
    assert sample.value not in masked


@pytest.mark.parametrize("kind", sorted(HARD_NEGATIVE_BUILDERS))
def test_hard_negatives_are_not_secrets(kind):
    rng = random.Random(7)
    samples = [hard_negative_sample(kind, rng).text for _ in range(30)]
    assert _findings(samples) == []


def test_aws_documented_example_keys_are_not_secrets():
    texts = [
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ]
    assert _findings(texts) == []


def test_nulls_and_clean_rows_have_no_findings_and_the_schema_holds():
    frame = find_secrets(pl.Series([None, "just text", ""], dtype=pl.String))
    assert frame.height == 0
    assert frame.schema == pl.Schema(
        {
            "index": pl.UInt32,
            "type": pl.String,
            "start": pl.Int64,
            "end": pl.Int64,
            "lead": pl.String,
        }
    )


def test_several_secrets_in_one_row_are_sorted_and_all_masked():
    rng = random.Random(11)
    token = secret_sample("github_token", rng).value
    key = secret_sample("aws_access_key_id", rng).value
    text = f"id={key} then {token}"

    findings = _findings([None, text])

    assert [(f["index"], f["type"], f["start"]) for f in findings] == [
        (1, "aws_access_key_id", 3),
        (1, "github_token", 3 + len(key) + 6),
    ]
    assert (
        mask_secrets(text, findings) == "id=<SECRET:aws_access_key_id> then <SECRET:github_token>"
    )


def test_a_provider_token_in_a_secret_assignment_is_reported_once_as_the_provider():
    token = secret_sample("stripe_key", random.Random(5)).value
    text = f'STRIPE_SECRET_KEY="{token}"'
    findings = _findings([text])
    assert [(f["type"], f["start"], f["end"]) for f in findings] == [
        ("stripe_key", 19, 19 + len(token))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "token_type = 'quoted-string'",  # the name does not end with a secret word
        "self.token = next_token",  # code, not a value
        "cache_token = current_token",
        "password = getpass.getpass()",
        "postgres://postgres:postgres@localhost/db",  # the user name as password: a default
        "-----BEGIN RSA PRIVATE KEY-----",  # a label without a key
        "sha256:" + "ab12" * 16,
        "password = '%(password)s'",  # a format string
    ],
)
def test_code_and_labels_that_mention_secrets_are_not_secrets(text):
    assert _findings([text]) == []


def test_a_jwt_whose_header_is_not_json_is_not_reported():
    text = "eyJub3RqcwNvbiBhdCBhbGw.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnopqrstuvwxyz012345"
    assert _findings([text]) == []


def test_shannon_entropy():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == 2.0


def test_mask_secrets_skips_overlapping_spans_and_keeps_the_rest():
    findings = [
        {"type": "jwt", "start": 2, "end": 6},
        {"type": "github_token", "start": 4, "end": 8},
    ]
    assert mask_secrets("0123456789", findings) == "0123<SECRET:github_token>89"


def test_real_text_has_no_secrets(sms_spam):
    assert find_secrets(sms_spam["text"]).height == 0
