"""Dataset cards of a published version: Croissant 1.0 JSON-LD with the Responsible-AI (RAI)
vocabulary, and a Markdown datasheet with the sections of Gebru et al., "Datasheets for
Datasets".

Both render the same facts (gathered by data_catalog/dataset_cards.py from the catalog, the
manifest and the version's ledger), and every statement is derived from them, so the two
files state the same figures. Facts hold counts, names and hashes only: no record text, no
secret or any part of one. The Responsible-AI statements are in pipeline/report/card_statements.py;
this module lays them out as Croissant nodes and datasheet sections.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.licenses import DEFAULT_TABLE
from pipeline.report.card_statements import (
    SPLIT_ROLES,
    biases,
    collection,
    collection_types,
    description,
    limitations,
    maintenance,
    preprocessing,
    published_sources,
    sensitive,
    use_cases,
)

# The standard Croissant 1.0 @context, as mlcroissant writes it, with `rai`.
_CROISSANT_TERMS = (
    "citeAs", "column", "equivalentProperty", "extract", "field", "fileProperty", "fileObject",
    "fileSet", "format", "includes", "isLiveDataset", "jsonPath", "key", "md5", "parentField",
    "path", "recordSet", "references", "regex", "repeated", "replace", "samplingRate",
    "separator", "source", "subField", "transform",
)  # fmt: skip
CROISSANT_CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/",
    "conformsTo": "dct:conformsTo",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "examples": {"@id": "cr:examples", "@type": "@json"},
    **{term: f"cr:{term}" for term in _CROISSANT_TERMS},
}
CROISSANT_1_0 = "http://mlcommons.org/croissant/1.0"
PARQUET = "application/x-parquet"
COLUMNS = {
    "record_id": "Stable id: xxh3-128 of the source and the record's id (or file and row) in it.",
    "source": "Name of the declared source the record came from.",
    "location": "File and line (or row) of the record in its source.",
    "text": "The text as published, after redactions, line and boilerplate removals.",
    "source_content_hash": "xxh3-128 of the text as ingested and normalized.",
    "content_hash": "xxh3-128 of the text as published.",
    "group": "Grouping key (e.g. sender or author); a group never spans two splits.",
    "timestamp": "When the record was written, in UTC.",
    "label": "The record's label, where its source has one (a reviewer's, where adjudicated).",
    "license": "SPDX license expression that applies to the record.",
    "consent": "Consent basis under which the record is held.",
    "metadata": "JSON object of the source's declared metadata fields, less those known only "
    "after the outcome.",
    "synthetic": "True for records of a source declared synthetic (generated).",
    "generator": "The generator a synthetic record's source declares.",
    "augmented_from": "For a variant made by the augmentation stage: its origin's record_id.",
    "cluster_id": "Smallest record_id among the record's duplicates and related records.",
    "split": "train, validation or test.",
    "language": "ISO 639 code of the text's language as identified by the quality stage "
    "(py3langid, among the configured candidates).",
    "language_score": "The identifier's probability for that language (0 to 1).",
}


def croissant(facts: dict[str, Any]) -> dict[str, Any]:
    """The version as Croissant 1.0 JSON-LD with RAI fields."""
    splits = [split for split, rows in facts["split_counts"].items() if rows]
    card = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_1_0,
        "name": facts["name"],
        "description": description(facts),
        "version": facts["dataset_hash"],
        "datePublished": facts["created_at"],
        "license": list(
            dict.fromkeys(_license_ref(s["license"]) for s in published_sources(facts))
        ),
        "creator": [{"@type": "sc:Organization", "name": owner} for owner in _owners(facts)],
        "citeAs": _bibtex(facts),
        "distribution": [_file_object(shard) for shard in facts["shards"]]
        + [_file_set(split) for split in splits],
        "recordSet": [_record_set(split, facts["columns"]) for split in splits],
        "rai:dataCollection": collection(facts),
        "rai:dataCollectionType": collection_types(facts),
        "rai:personalSensitiveInformation": sensitive(facts),
        "rai:dataLimitations": limitations(facts),
        "rai:dataBiases": biases(facts),
        "rai:dataUseCases": use_cases(facts),
        "rai:dataPreprocessingProtocol": preprocessing(facts),
        "rai:dataReleaseMaintenancePlan": maintenance(facts),
    }
    published = facts["published"]
    if published and published["first_timestamp"]:
        card["rai:dataCollectionTimeframe"] = [
            published["first_timestamp"],
            published["last_timestamp"],
        ]
    if facts["url"]:
        card["url"] = facts["url"]
    return card


def datasheet(facts: dict[str, Any]) -> str:
    """The version as a Markdown datasheet (Gebru et al.), with the Croissant card's figures."""
    ledger, hash_ = facts["ledger"], facts["dataset_hash"]
    lines = [
        f"# Datasheet: {facts['name']} version {hash_[:16]}",
        "",
        f"- dataset hash: `{hash_}`",
        f"- published: {facts['created_at']} by run `{facts['run_id']}`",
        f"- parent version: {facts['parent_version'] or 'none'}",
        f"- status: {facts['status']}"
        + (f" ({facts['status_reason']})" if facts["status_reason"] else ""),
        f"- code version: `{facts['code_version']}`; config hash `{facts['config_hash']}`",
        "",
        "## Motivation",
        "",
        description(facts),
        "",
        *_bullets(use_cases(facts)[:1]),
        "",
        "## Composition",
        "",
        _table(
            ["split", "records", "shards"],
            [
                [split, rows, sum(s["split"] == split for s in facts["shards"])]
                for split, rows in facts["split_counts"].items()
            ],
        ),
        "",
        _table(
            ["source", "owner", "license", "license class", "consent", "records"],
            [
                [
                    s["name"],
                    s["owner"],
                    s["license"],
                    s["license_class"],
                    s["consent"],
                    s["records"],
                ]
                for s in facts["sources"]
            ],
        ),
        "",
        "Fields of every record:",
        "",
        _table(
            ["field", "type", "meaning"],
            [[c["name"], c["type"], COLUMNS.get(c["name"], "")] for c in facts["columns"]],
        ),
        "",
        "Personal and sensitive information:",
        "",
        *_bullets(sensitive(facts)),
        "",
        "Biases:",
        "",
        *_bullets(biases(facts)),
        "",
        "## Collection process",
        "",
        collection(facts),
        "",
        *_bullets(collection_types(facts)),
        "",
        "## Preprocessing, cleaning and labeling",
        "",
        *_bullets(preprocessing(facts)),
        "",
        "Terminal outcome of every record, by source:",
        "",
        _table(
            ["source", "action", "reason", "records"],
            [
                [source, action, reason, count]
                for source, actions in ledger["by_source"].items()
                for action, counted in actions.items()
                for reason, count in counted.items()
            ],
        ),
        "",
        "## Uses",
        "",
        *_bullets(use_cases(facts)),
        "",
        "Limitations:",
        "",
        *_bullets(limitations(facts)),
        "",
        "## Distribution",
        "",
        "Licenses: "
        + "; ".join(f"{s['name']}: {s['license']}" for s in published_sources(facts))
        + ". Shards are zstd Parquet files, read with the manifest (`manifest.json`), which "
        "lists each shard's sha256:",
        "",
        _table(
            ["shard", "split", "rows", "bytes", "sha256"],
            [
                [f"`{s['path']}`", s["split"], s["rows"], s["bytes"], f"`{s['sha256']}`"]
                for s in facts["shards"]
            ],
        ),
        "",
        "## Maintenance",
        "",
        maintenance(facts),
        "",
    ]
    return "\n".join(lines)


# Croissant nodes ---------------------------------------------------------------------------


def _file_object(shard: dict[str, Any]) -> dict[str, Any]:
    return {
        "@type": "cr:FileObject",
        "@id": shard["path"],
        "name": shard["path"],
        "description": f"{shard['rows']} records of the {shard['split']} split",
        "contentUrl": shard["path"],
        "contentSize": f"{shard['bytes']} B",
        "encodingFormat": PARQUET,
        "sha256": shard["sha256"],
    }


def _file_set(split: str) -> dict[str, Any]:
    return {
        "@type": "cr:FileSet",
        "@id": f"{split}-shards",
        "name": f"{split}-shards",
        "description": f"The Parquet shards of the {split} split.",
        "encodingFormat": PARQUET,
        "includes": f"data/{split}/*.parquet",
    }


def _record_set(split: str, columns: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "@type": "cr:RecordSet",
        "@id": split,
        "name": split,
        "description": f"The {split} split: {SPLIT_ROLES.get(split, split)}.",
        "field": [
            {
                "@type": "cr:Field",
                "@id": f"{split}/{column['name']}",
                "name": column["name"],
                "description": COLUMNS.get(column["name"], column["name"]),
                "dataType": _data_type(column["type"]),
                "source": {
                    "fileSet": {"@id": f"{split}-shards"},
                    "extract": {"column": column["name"]},
                },
            }
            for column in columns
        ],
    }


def _data_type(polars_type: str) -> str:
    """The schema.org type of a polars dtype as manifests write it (`Datetime(...)`)."""
    base = polars_type.split("(")[0]
    if base.removeprefix("U").startswith("Int"):
        return "sc:Integer"
    types = {"Boolean": "sc:Boolean", "Date": "sc:Date", "Datetime": "sc:DateTime"}
    return types.get(base, "sc:Float" if base.startswith("Float") else "sc:Text")


def _license_ref(expression: str) -> str:
    """The SPDX page of a single known license id; an expression or LicenseRef as written."""
    if expression.lower() in DEFAULT_TABLE and expression not in ("NONE", "NOASSERTION"):
        return f"https://spdx.org/licenses/{expression}.html"
    return expression


def _bibtex(facts: dict[str, Any]) -> str:
    key = f"{facts['name']}_{facts['dataset_hash'][:12]}".replace("-", "_")
    owners = " and ".join(f"{{{owner}}}" for owner in _owners(facts))
    return (
        f"@misc{{{key},\n  title = {{{facts['name']}, dataset version "
        f"{facts['dataset_hash'][:16]}}},\n  author = {{{owners}}},\n"
        f"  year = {{{facts['created_at'][:4]}}},\n"
        f"  note = {{dataset hash {facts['dataset_hash']}}}\n}}"
    )


# helpers --------------------------------------------------------------------------------------


def _owners(facts: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(s["owner"] for s in published_sources(facts)))


def _bullets(statements: list[str]) -> list[str]:
    return [f"- {statement}" for statement in statements]


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)
