"""Reason codes and ledger actions: the only vocabulary the ledger uses.

Each later capability adds its codes here, in its own block.
"""

# Actions. The first three are terminal: every record ends with exactly one of them.
PUBLISHED = "published"
DROPPED = "dropped"
QUARANTINED = "quarantined"
TERMINAL_ACTIONS = (PUBLISHED, DROPPED, QUARANTINED)
# Non-terminal actions record what happened to a record on its way.
EDITED = "edited"
MOVED = "moved"

# Ingest: bad rows. Evidence holds the file and the line (jsonl, text) or row (csv, parquet).
INVALID_JSON = "invalid_json"
INVALID_UTF8 = "invalid_utf8"
MISSING_TEXT = "missing_text"
EMPTY_TEXT = "empty_text"
WRONG_TYPE = "wrong_type"
UNPARSEABLE_TIMESTAMP = "unparseable_timestamp"
DUPLICATE_SOURCE_ID = "duplicate_source_id"
UNPARSEABLE_ENTRY = "unparseable_entry"
MALFORMED_ROW = "malformed_row"  # a CSV row whose fields do not match the header

# Exact dedup.
EXACT_DUPLICATE = "exact_duplicate"

# Split.
SPLIT_CONFLICT = "split_conflict"
