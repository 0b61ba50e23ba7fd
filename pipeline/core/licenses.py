"""License classes: the one table that maps SPDX ids and `LicenseRef-…` references to a class.

Classes, from least to most restrictive:

| class | meaning for training | examples |
|---|---|---|
| permissive | use freely; at most keep a notice | CC0-1.0, Unlicense, 0BSD, MIT, BSD-2/3-Clause, Apache-2.0, ISC, Zlib, PSF-2.0, BSL-1.0, CDLA-Permissive-1.0/2.0, PDDL-1.0 |
| attribution | use freely; credit the author where the data is used | CC-BY-1.0 … 4.0, ODC-By-1.0 |
| share-alike | derived works must carry the same license | GPL, LGPL, AGPL, MPL, EPL, EUPL, CC-BY-SA-*, ODbL-1.0, CDLA-Sharing-1.0, GFDL |
| non-commercial | no commercial use | CC-BY-NC-*, CC-BY-NC-SA-* |
| research-only | research or academic use only | LicenseRef-research-only, LicenseRef-academic-use-only |
| proprietary | no rights granted (or no derivatives) | NONE, LicenseRef-proprietary, LicenseRef-all-rights-reserved, CC-BY-ND-*, CC-BY-NC-ND-* |
| unknown | anything not in the table, NOASSERTION | LicenseRef-whatever |

A run config's `policy.licenses.classes` adds to or overrides the table. SPDX expressions:
`A OR B` takes the least restrictive choice (the licensee may pick), `A AND B` the most
restrictive part, `A WITH exception` the class of A; AND binds tighter than OR; parentheses group. `-only`,
`-or-later` and `+` variants share their base id's class. Lookups ignore case.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

LICENSE_CLASSES = (
    "permissive",
    "attribution",
    "share-alike",
    "non-commercial",
    "research-only",
    "proprietary",
    "unknown",
)
RANK = {name: rank for rank, name in enumerate(LICENSE_CLASSES)}

_TABLE = {
    "permissive": [
        "CC0-1.0", "Unlicense", "0BSD", "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause",
        "Apache-2.0", "ISC", "Zlib", "PSF-2.0", "Python-2.0", "BSL-1.0", "WTFPL", "PDDL-1.0",
        "CDLA-Permissive-1.0", "CDLA-Permissive-2.0", "CC-PDDC", "X11", "NCSA", "Unicode-DFS-2016",
        "O-UDA-1.0",
    ],
    "attribution": [
        "CC-BY-1.0", "CC-BY-2.0", "CC-BY-2.5", "CC-BY-3.0", "CC-BY-4.0", "ODC-By-1.0",
        "Artistic-2.0",
    ],
    "share-alike": [
        "GPL-1.0", "GPL-2.0", "GPL-3.0", "LGPL-2.0", "LGPL-2.1", "LGPL-3.0", "AGPL-3.0",
        "MPL-1.1", "MPL-2.0", "EPL-1.0", "EPL-2.0", "EUPL-1.1", "EUPL-1.2", "CC-BY-SA-1.0",
        "CC-BY-SA-2.0", "CC-BY-SA-2.5", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "ODbL-1.0",
        "CDLA-Sharing-1.0", "GFDL-1.1", "GFDL-1.2", "GFDL-1.3",
    ],
    "non-commercial": [
        "CC-BY-NC-1.0", "CC-BY-NC-2.0", "CC-BY-NC-2.5", "CC-BY-NC-3.0", "CC-BY-NC-4.0",
        "CC-BY-NC-SA-1.0", "CC-BY-NC-SA-2.0", "CC-BY-NC-SA-2.5", "CC-BY-NC-SA-3.0",
        "CC-BY-NC-SA-4.0",
    ],
    "research-only": [
        "LicenseRef-research-only", "LicenseRef-academic-use-only", "C-UDA-1.0",
    ],
    "proprietary": [
        "NONE", "LicenseRef-proprietary", "LicenseRef-all-rights-reserved", "CC-BY-ND-1.0",
        "CC-BY-ND-2.0", "CC-BY-ND-2.5", "CC-BY-ND-3.0", "CC-BY-ND-4.0", "CC-BY-NC-ND-1.0",
        "CC-BY-NC-ND-2.0", "CC-BY-NC-ND-2.5", "CC-BY-NC-ND-3.0", "CC-BY-NC-ND-4.0",
    ],
    "unknown": ["NOASSERTION"],
}  # fmt: skip

DEFAULT_TABLE = {
    license_id.lower(): license_class for license_class, ids in _TABLE.items() for license_id in ids
}
_VARIANT = re.compile(r"(-only|-or-later|\+)$", re.IGNORECASE)


def license_class(expression: str | None, extra: Mapping[str, str] | None = None) -> str:
    """The class of an SPDX expression or `LicenseRef-…`; `unknown` when none is found or the
    expression does not parse."""
    if not expression or not expression.strip():
        return "unknown"
    table = {**DEFAULT_TABLE, **{key.lower(): value for key, value in (extra or {}).items()}}
    try:
        return _Parser(expression, table).parse()
    except ValueError:
        return "unknown"


def check_expression(expression: str) -> None:
    """Raise ValueError naming the problem if `expression` is not a valid SPDX expression."""
    _Parser(expression, DEFAULT_TABLE).parse()


def most_restrictive(classes: list[str]) -> str:
    return max(classes, key=RANK.__getitem__)


_TOKEN = re.compile(r"\s*(\(|\)|[A-Za-z0-9.+:-]+)")
_ID = re.compile(r"^(LicenseRef-[A-Za-z0-9.-]+|[A-Za-z0-9.+-]+)$")


class _Parser:
    """`or := and (OR and)*`, `and := term (AND term)*`, `term := ( or ) | id [WITH id]`."""

    def __init__(self, expression: str, table: Mapping[str, str]):
        self.tokens, self.table, self.at = self._tokenize(expression), table, 0

    @staticmethod
    def _tokenize(expression: str) -> list[str]:
        tokens, position = [], 0
        while position < len(expression.rstrip()):
            match = _TOKEN.match(expression, position)
            if match is None:
                raise ValueError(f"unexpected {expression[position:].strip()[:10]!r}")
            tokens.append(match.group(1))
            position = match.end()
        return tokens

    def parse(self) -> str:
        result = self._or()
        if self.at != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.at]!r}")
        return result

    def _next(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self) -> str:
        token = self._next()
        if token is None:
            raise ValueError("the expression ends too early")
        self.at += 1
        return token

    def _or(self) -> str:
        choices = [self._and()]
        while self._next() == "OR":  # the licensee may pick the lighter terms
            self.at += 1
            choices.append(self._and())
        return min(choices, key=RANK.__getitem__)

    def _and(self) -> str:
        parts = [self._term()]
        while self._next() == "AND":  # all terms apply
            self.at += 1
            parts.append(self._term())
        return most_restrictive(parts)

    def _term(self) -> str:
        token = self._take()
        if token == "(":
            inner = self._or()
            if self._next() != ")":
                raise ValueError("a '(' is not closed")
            self.at += 1
            return inner
        if token in ("AND", "OR", "WITH", ")") or not _ID.match(token):
            raise ValueError(f"expected a license id, found {token!r}")
        if self._next() == "WITH":  # an exception adds permissions: the base license counts
            self.at += 1
            self._take()
        base = token.lower()
        return self.table.get(base) or self.table.get(_VARIANT.sub("", base)) or "unknown"
