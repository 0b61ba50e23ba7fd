"""The personal-data detector: exact spans, checksums, look-alikes, redaction, real SMS."""

from __future__ import annotations

import random

import polars as pl
import pytest

from pipeline.text.personal_data import (
    PERSONAL_DATA_TYPES,
    RULES,
    find_personal_data,
    iban_valid,
    luhn_valid,
    redact_personal_data,
)

# Documented test values: card numbers from the schemes' test ranges, IBANs from the registry.
FOUND = [
    (
        "email",
        "write to jane.doe+news@mail.example.co.uk today",
        "jane.doe+news@mail.example.co.uk",
    ),
    ("phone", "Call 09061701461 now", "09061701461"),
    ("phone", "ring 0800 123 4567 or", "0800 123 4567"),
    ("phone", "office (020) 7946 0018.", "(020) 7946 0018"),
    ("phone", "dial +44 20 7946 0018 today", "+44 20 7946 0018"),
    ("phone", "US: (415) 555-0132", "(415) 555-0132"),
    ("phone", "or 415-555-0132.", "415-555-0132"),
    ("phone", "T&C's apply 08452810075over18's", "08452810075"),
    ("ip_address", "from 192.168.1.20:8080", "192.168.1.20"),
    ("ip_address", "host 2001:db8::8a2e:370:7334 up", "2001:db8::8a2e:370:7334"),
    ("ip_address", "link fe80::1ff:fe23:4567:890a.", "fe80::1ff:fe23:4567:890a"),
    ("credit_card", "card 4111 1111 1111 1111 exp", "4111 1111 1111 1111"),
    ("credit_card", "mc 5500-0000-0000-0004.", "5500-0000-0000-0004"),
    ("credit_card", "amex 378282246310005", "378282246310005"),
    ("iban", "IBAN DE89 3704 0044 0532 0130 00, thanks", "DE89 3704 0044 0532 0130 00"),
    ("iban", "pay GB82WEST12345698765432 now", "GB82WEST12345698765432"),
]


@pytest.mark.parametrize(("kind", "text", "value"), FOUND)
def test_each_type_is_found_at_its_exact_span(kind, text, value):
    start = text.index(value)
    found = find_personal_data(pl.Series([None, text])).to_dicts()
    assert found == [{"index": 1, "type": kind, "start": start, "end": start + len(value)}]


def test_every_type_is_covered():
    assert {kind for kind, _, _ in FOUND} == set(PERSONAL_DATA_TYPES)


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112",  # Luhn fails
        "4111111111111112",
        "1234567812345670",  # Luhn passes, but no card scheme starts with 1
        "ISBN 9781234567897",
        "IBAN DE89 3704 0044 0532 0130 01",  # mod-97 fails
        "DE89370400440532013",  # too short for Germany
        "XX89370400440532013000",  # not a country with IBANs
        "version 1.2.3 and 3.11.4, OID 1.3.6.1.4.1, v1.2.3.4",
        "loopback 127.0.0.1, any 0.0.0.0, mask 255.255.255.0, 999.1.1.1",
        "slices a[1::2] and ::1, time 12:30:45, mac 00:1a:2b:3c:4d:5e",
        "on 2023-01-15 at 12:30:45, 15/01/2023, 1700000000000",
        "text 87121 to win, order 12345678901",  # short codes and bare runs
        "sha 3f2a9c0d1e4b5a6978877665544332211aabbccd",
    ],
)
def test_look_alikes_and_checksum_failures_are_not_found(text):
    assert find_personal_data(pl.Series([text])).height == 0


def test_checksums():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")


def test_redaction_replaces_every_span_with_its_label():
    text = "Mail jane@example.org, call +44 20 7946 0018, card 4111111111111111, ip 10.1.2.3."
    findings = find_personal_data(pl.Series([text])).to_dicts()
    assert redact_personal_data(text, findings) == (
        "Mail <EMAIL>, call <PHONE>, card <CREDIT_CARD>, ip <IP_ADDRESS>."
    )


def test_iban_redaction():
    text = "to NL91 ABNA 0417 1643 00."
    findings = find_personal_data(pl.Series([text])).to_dicts()
    assert redact_personal_data(text, findings) == "to <IBAN>."


def test_uk_premium_numbers_in_the_sms_spam_collection_are_phones(sms_spam):
    texts = sms_spam["text"]
    found = find_personal_data(texts)
    phones = found.filter(pl.col("type") == "phone")
    values = {
        texts[row["index"]][row["start"] : row["end"]] for row in phones.iter_rows(named=True)
    }
    assert {"09061701461", "08712300220", "08000930705", "0808 145 4742"} <= values
    # Every message that mentions an 07/08/09 number has it found, except inside a domain.
    mentions = texts.str.contains(r"(?-u:\b)0[789][0-9]{9}(?-u:\b)").fill_null(False)
    rows_with_phone = set(phones["index"].to_list())
    missed = [i for i, hit in enumerate(mentions.to_list()) if hit and i not in rows_with_phone]
    assert mentions.sum() == 311
    assert [texts[i].count("www.07781482378.com") for i in missed] == [1, 1]


@pytest.mark.parametrize(
    ("text", "emails"),
    [
        ("a@b.co,c.d@e-f.org x@@y.com", ["a@b.co", "c.d@e-f.org"]),
        ("@@@ user@host.io@other.com me@x.de", ["user@host.io", "me@x.de"]),
        ("-x@y.com _z@w.org (1a@b.cd)", ["1a@b.cd"]),
        ("a" * 65 + "@toolong.com " + "b" * 64 + "@fits.com", ["b" * 64 + "@fits.com"]),
    ],
)
def test_emails_next_to_each_other_and_at_the_limits(text, emails):
    found = find_personal_data(pl.Series([text]))
    assert [text[s:e] for s, e in zip(found["start"], found["end"], strict=True)] == emails


def test_rules_searched_from_a_pivot_find_exactly_what_finditer_finds():
    """The e-mail rule is tried only around each `@`: the matches must be finditer's."""
    rng = random.Random(5)
    email = next(rule for rule in RULES if rule.type == "email")
    assert email.pivot == "@"
    locals_ = ["", "a", "b1.c", "-x", "x+y%z", "a" * 63, "a" * 64, "a" * 65, "q@"]
    domains = ["ex.com", "a-b.de", "-bad.com", "x.c", "x..com", "h.io@o.com", "x.com-"]
    noise = [" ", ",", ".", "@", "-", "_", "(", "a", "1", ""]
    matched = 0
    for _ in range(3000):
        text = "".join(
            rng.choice(noise) + rng.choice(locals_) + "@" + rng.choice(domains)
            for _ in range(rng.randint(0, 4))
        )
        expected = [m.span() for m in email.compiled.finditer(text)]
        assert email.findings(text) == expected, text
        matched += len(expected)
    assert matched > 500  # the texts do hold addresses


def test_personal_data_in_duplicate_rows_is_found_in_every_row():
    text = "Mail jane@example.org or call +44 20 7946 0018."
    found = find_personal_data(pl.Series([text, None, text, "x", text]))
    assert found.select("index", "type", "start").rows() == [
        (i, kind, start) for i in (0, 2, 4) for kind, start in (("email", 5), ("phone", 30))
    ]
