"""Untrusted text (record text, labels, notes, file names) made safe to print on a terminal.

A control character can clear the screen, set the window title or rewrite what was printed
before it (ESC, CSI, OSC), and a bidi control reorders what a reader sees. `printable` shows
each as a visible escape instead; `unsafe_char` finds the first, for input that refuses them.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls, and the bidi controls: marks, embeddings and overrides,
# isolates.
_BIDI = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE_LINE = re.compile(rf"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_MULTILINE = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")  # \t, \n kept


def _escaped(found: re.Match) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _pattern(multiline: bool) -> re.Pattern:
    return _UNSAFE_MULTILINE if multiline else _UNSAFE_LINE


def printable(text: object, multiline: bool = False) -> str:
    """`text` with every control and bidi character written as an escape (`\\x1b`, `\\u202e`);
    `multiline` keeps new lines and tabs."""
    return _pattern(multiline).sub(_escaped, str(text))


def unsafe_char(text: str, multiline: bool = True) -> tuple[int, str] | None:
    """(position, `U+XXXX`) of the first control or bidi character of `text`; None when it has
    none (`multiline`: new lines and tabs are allowed)."""
    found = _pattern(multiline).search(text)
    return None if found is None else (found.start(), f"U+{ord(found.group()):04X}")
