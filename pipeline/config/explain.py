"""Validation errors explained with the file, the line, the section or source and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.config.run import PLANNED_SECTIONS


def _explain(error: ValidationError, path: Path, root: Any, lines: dict, at: tuple = ()) -> str:
    """One line per problem: `file:line: section.field (source name): message`."""
    problems = []
    for item in error.errors():
        loc = _document_path(root, at + tuple(item["loc"]))
        if loc is None:  # the error of a union branch the document did not take
            continue
        line = next(
            (lines[loc[:end]] for end in range(len(loc), -1, -1) if loc[:end] in lines), None
        )
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "literal_error":
            message += f" (got {item['input']!r})"
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
            if len(loc) == 1 and loc[0] in PLANNED_SECTIONS:
                message = (
                    f"not available in this version: it arrives with {PLANNED_SECTIONS[loc[0]]}"
                )
        where = f"{path}:{line}" if line else str(path)
        problems.append(f"{where}: {_describe(root, loc)}: {message}")
    return "invalid config:\n  " + "\n  ".join(dict.fromkeys(problems))


def _document_path(root: Any, loc: tuple) -> tuple | None:
    """Turn a pydantic error location into a path through the YAML document: drop union
    branch tags (`list[SourceDeclaration]`, `str`); None for the error of a branch the
    document did not take (`sources` given as a list, so its `str` branch is moot)."""
    path, node = [], root
    for part in loc:
        present = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        )
        if present:
            path.append(part)
            node = node[part]
        elif part == "str" and isinstance(node, list | dict):
            return None
        elif isinstance(part, str) and ("[" in part or part == "str"):
            continue
        else:  # a missing or unknown key: name it
            path.append(part)
            node = None
    return tuple(path)


def _describe(root: Any, loc: tuple) -> str:
    words, node = [], root
    for part in loc:
        if isinstance(part, int) and isinstance(node, list):
            node = node[part]
            name = node.get("name") if isinstance(node, dict) else None
            words[-1] = f"{words[-1] if words else 'sources'}[{part}]" + (
                f" ({name})" if name else ""
            )
            if not words:
                words.append(f"sources[{part}]")
        else:
            words.append(str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return ".".join(words) or "config"
