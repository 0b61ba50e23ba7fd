"""The license table and SPDX expressions: each class, variants, OR/AND/WITH, extra entries."""

from __future__ import annotations

import re

import pytest

from pipeline.core.licenses import (
    DEFAULT_TABLE,
    LICENSE_CLASSES,
    check_expression,
    license_class,
    most_restrictive,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("CC0-1.0", "permissive"),
        ("MIT", "permissive"),
        ("Apache-2.0", "permissive"),
        ("CC-BY-4.0", "attribution"),
        ("GPL-3.0-or-later", "share-alike"),
        ("GPL-2.0+", "share-alike"),
        ("LGPL-2.1-only", "share-alike"),
        ("CC-BY-SA-4.0", "share-alike"),
        ("CC-BY-NC-4.0", "non-commercial"),
        ("LicenseRef-research-only", "research-only"),
        ("CC-BY-ND-4.0", "proprietary"),
        ("NONE", "proprietary"),
        ("NOASSERTION", "unknown"),
        ("LicenseRef-Debian-package-terms", "unknown"),
        ("mit", "permissive"),  # SPDX ids ignore case
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_single_ids_map_to_their_class(expression, expected):
    assert license_class(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("MIT OR GPL-3.0", "permissive"),  # the licensee picks the lighter terms
        ("MIT AND CC-BY-NC-4.0", "non-commercial"),  # all terms apply
        ("GPL-2.0 WITH Classpath-exception-2.0", "share-alike"),
        ("CC-BY-NC-4.0 OR MIT AND CC-BY-SA-4.0", "share-alike"),  # AND binds tighter
        ("MIT OR LicenseRef-unheard-of", "permissive"),
        ("MIT AND LicenseRef-unheard-of", "unknown"),
        ("(MIT OR GPL-3.0) AND CC-BY-NC-4.0", "non-commercial"),
        ("CC-BY-NC-4.0 AND (MIT OR GPL-3.0)", "non-commercial"),
        ("(CC-BY-NC-4.0 OR MIT) AND CC-BY-4.0", "attribution"),
        ("(MIT OR", "unknown"),  # does not parse
    ],
)
def test_expressions(expression, expected):
    assert license_class(expression) == expected


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("MIT OR", "ends too early"),
        ("(MIT OR GPL-3.0", "'(' is not closed"),
        ("MIT GPL-3.0", "unexpected 'GPL-3.0'"),
        ("AND MIT", "expected a license id, found 'AND'"),
        ("MIT; rm -rf", "unexpected ';"),
    ],
)
def test_malformed_expressions_are_explained(expression, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        check_expression(expression)


def test_extra_entries_add_and_override():
    extra = {"LicenseRef-Debian-package-terms": "share-alike", "MIT": "proprietary"}
    assert license_class("LicenseRef-Debian-package-terms", extra) == "share-alike"
    assert license_class("MIT", extra) == "proprietary"


def test_every_table_entry_has_a_known_class_and_unknown_is_strictest():
    assert set(DEFAULT_TABLE.values()) <= set(LICENSE_CLASSES)
    assert most_restrictive(["permissive", "unknown", "share-alike"]) == "unknown"
    assert most_restrictive(["attribution", "non-commercial"]) == "non-commercial"
