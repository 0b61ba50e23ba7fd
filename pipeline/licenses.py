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
restrictive part, `A WITH exception` the class of A; AND binds tighter than OR. `-only`,
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
    """The class of an SPDX expression or `LicenseRef-…`; `unknown` when none is found."""
    if not expression or not expression.strip():
        return "unknown"
    table = {**DEFAULT_TABLE, **{key.lower(): value for key, value in (extra or {}).items()}}
    choices = []
    for alternative in re.split(r"\s+OR\s+", expression.strip()):
        parts = [_single_class(part, table) for part in re.split(r"\s+AND\s+", alternative)]
        choices.append(most_restrictive(parts))
    return min(choices, key=RANK.__getitem__)


def _single_class(license_id: str, table: Mapping[str, str]) -> str:
    base = re.split(r"\s+WITH\s+", license_id.strip())[0].lower()
    return table.get(base) or table.get(_VARIANT.sub("", base)) or "unknown"


def most_restrictive(classes: list[str]) -> str:
    return max(classes, key=RANK.__getitem__)
