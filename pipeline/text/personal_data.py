"""Personal-data detector: e-mail addresses, phone numbers, IP addresses, payment card numbers
and IBANs, with the same candidate-then-verify design as pipeline/text/secrets.py.

What counts (and what is left out on purpose):
- credit_card: 13–19 digits, bare or in groups split by one kind of separator (space or
  dash), passing the Luhn check and starting like a card scheme (Visa, Mastercard, Amex,
  Discover, JCB, Diners, UnionPay, Maestro) with a length that scheme issues.
- iban: country code with its registered length (unknown countries are skipped), mod-97
  check; bare or in groups of four.
- ip_address: IPv4 with four octets of at most 255, not part of a longer dotted run (OIDs,
  version strings such as 1.2.3.4.5) and not preceded by a letter (v1.2.3.4). Not reported:
  addresses that identify no one — 0.0.0.0/8, loopback 127/8, multicast and reserved
  (224 and up, which also covers netmasks such as 255.255.255.0). IPv6 as validated by
  `ipaddress`, with at least three groups written (so `a[1::2]` slicing is not one),
  not loopback or unspecified.
- phone: international numbers (+ country code, 8–15 digits in all); national numbers with a
  trunk 0 (UK style, 10–12 digits: 09061701461, 0800 123 4567, (020) 7946 0018); North
  American numbers written with separators ((415) 555-0132, 415-555-0132). Dates, times,
  version numbers and bare digit runs that do not start with 0 or + are not phones.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import string
from collections.abc import Iterable

import polars as pl

from pipeline.text.text_scan import Rule, SpanScanner, replace_spans

PERSONAL_DATA_TYPES = ("email", "phone", "ip_address", "credit_card", "iban")
LABELS = {kind: f"<{kind.upper()}>" for kind in PERSONAL_DATA_TYPES}

# Registered IBAN lengths (SWIFT IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip

# (prefixes, allowed lengths) of the card schemes.
_CARD_SCHEMES = (
    (("4",), (13, 16, 19)),  # Visa
    (tuple(str(p) for p in range(51, 56)) + tuple(str(p) for p in range(2221, 2721)), (16,)),
    (("34", "37"), (15,)),  # Amex
    (("6011", "65") + tuple(str(p) for p in range(644, 650)), (16, 17, 18, 19)),  # Discover
    (tuple(str(p) for p in range(3528, 3590)), (16, 17, 18, 19)),  # JCB
    (("36", "38") + tuple(str(p) for p in range(300, 306)), (14, 15, 16)),  # Diners
    (("62",), (16, 17, 18, 19)),  # UnionPay
    (("50", "56", "57", "58", "6"), (12, 13, 14, 15, 16, 17, 18, 19)),  # Maestro
)


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """Registered length for the country and the ISO 13616 mod-97 check."""
    if IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


_NOT_DIGIT = re.compile(r"[^0-9]")


def _card(match: re.Match[str]) -> bool:
    number = match.group()
    if " " in number and "-" in number:
        return False  # mixed separators: more likely a list of numbers than a card
    digits = number.replace(" ", "").replace("-", "")
    scheme_fits = any(
        digits.startswith(prefixes) and len(digits) in lengths
        for prefixes, lengths in _CARD_SCHEMES
    )
    return scheme_fits and luhn_valid(digits)


def _iban(match: re.Match[str]) -> bool:
    return iban_valid(match.group().replace(" ", ""))


def _ipv4(match: re.Match[str]) -> bool:
    octets = [int(part) for part in match.group().split(".")]
    return all(octet <= 255 for octet in octets) and octets[0] not in (0, 127) and octets[0] < 224


def _ipv6(match: re.Match[str]) -> bool:
    text = match.group()
    if len([group for group in text.split(":") if group]) < 3:
        return False
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


def _phone(match: re.Match[str]) -> bool:
    digits = _NOT_DIGIT.sub("", match.group())
    if match.group().startswith("+"):
        return 8 <= len(digits) <= 15
    return 10 <= len(digits) <= 12


_HEX = "[0-9A-Fa-f]{1,4}"
_NOT_IN_NUMBER = r"(?<![0-9A-Za-z.,+\-/:_])"  # North American numbers; national ones allow -/:
_NOT_BEFORE_DIGITS = r"(?![0-9]|[.,\-/:][0-9])"
_EMAIL_LOCAL = string.ascii_letters + string.digits + "._%+-"  # the characters

# A pattern whose first character is a class or a literal lets Python `re` jump from one
# occurrence of that character to the next; a lookbehind in front of it makes `re` try every
# position. So `(?<!C)X` is written `X(?<!CX)` (the same test, once X is consumed) where X is
# one character. E-mail addresses, whose first character is any letter, are searched from
# their `@` instead (`pivot`).
RULES: tuple[Rule, ...] = (
    Rule("email",
         r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
         r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?"
         r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![A-Za-z0-9\-])",
         pivot="@", pivot_run=_EMAIL_LOCAL, pivot_reach=64),
    Rule("credit_card",
         r"[2-6](?<![0-9A-Za-z.,_\-][2-6])[0-9]{3}(?:[ \-]?[0-9]){8,15}" + _NOT_BEFORE_DIGITS,
         _card),
    Rule("iban",
         r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}"
         r"(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)"
         r"(?![A-Za-z0-9])", _iban),
    Rule("ip_address",
         r"[0-9](?<![0-9A-Za-z.:][0-9])[0-9]{0,2}\.(?:[0-9]{1,3}\.){2}[0-9]{1,3}"
         r"(?![0-9A-Za-z]|\.[0-9])", _ipv4),
    Rule("ip_address",
         r"(?<![0-9A-Za-z:])(?:(?:" + _HEX + ":){7}" + _HEX
         + r"|(?:" + _HEX + "(?::" + _HEX + "){0,6})?::(?:" + _HEX + "(?::" + _HEX + "){0,6})?)"
         r"(?![0-9A-Za-z:])", _ipv6),
    Rule("phone",
         r"\+(?<![0-9A-Za-z+]\+)[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,5}\)?){2,6}"
         + _NOT_BEFORE_DIGITS, _phone),
    Rule("phone",
         r"(?:\((?<![0-9A-Za-z.,+_]\()0[1-9][0-9]{1,3}\) ?|0(?<![0-9A-Za-z.,+_]0)[1-9][0-9]{1,3}[ \-]?)"
         r"[0-9]{3,4}[ \-]?[0-9]{3,5}"
         + _NOT_BEFORE_DIGITS, _phone),
    Rule("phone",
         _NOT_IN_NUMBER + r"(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[\-. ])"
         r"[2-9][0-9]{2}[\-. ][0-9]{4}" + _NOT_BEFORE_DIGITS, _phone),
)  # fmt: skip


@functools.cache
def _scanner(types: frozenset[str]) -> SpanScanner:
    return SpanScanner([rule for rule in RULES if rule.type in types])


def find_personal_data(
    texts: pl.Series, types: Iterable[str] = PERSONAL_DATA_TYPES
) -> pl.DataFrame:
    """One row per finding of the given types: index (UInt32, position in `texts`), type,
    start, end (character offsets, end exclusive); sorted by index, start. Nulls have no
    findings."""
    return _scanner(frozenset(types)).scan(texts)


def redact_personal_data(text: str, findings: list[dict]) -> str:
    """Replace each finding's span by its label: <EMAIL>, <PHONE>, <IP_ADDRESS>, …"""
    return replace_spans(text, findings, lambda finding, _: LABELS[finding["type"]])
