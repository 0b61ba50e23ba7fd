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
APPROVED = "approved"  # a reviewer approved a quarantined record; it goes on
GENERATED = "generated"  # a record made by the run itself (augmentation); evidence its origin

# Ingest: bad rows. Evidence holds the file and the line (jsonl, text) or row (csv, parquet).
INVALID_JSON = "invalid_json"
INVALID_UTF8 = "invalid_utf8"
MISSING_TEXT = "missing_text"
EMPTY_TEXT = "empty_text"
WRONG_TYPE = "wrong_type"
UNPARSEABLE_TIMESTAMP = "unparseable_timestamp"
# Before gates.earliest_timestamp or after the run's start plus gates.future_days (or an epoch
# number of more than 11 digits); evidence: value (its first 32 characters), earliest, latest.
TIMESTAMP_OUT_OF_RANGE = "timestamp_out_of_range"
DUPLICATE_SOURCE_ID = "duplicate_source_id"
UNPARSEABLE_ENTRY = "unparseable_entry"
MALFORMED_ROW = "malformed_row"  # a CSV row whose fields do not match the header
TEXT_TOO_LONG = "text_too_long"  # over ingest.max_text_chars (or its source's); evidence: chars
RECORD_TOO_LARGE = "record_too_large"  # a line over ingest.max_record_bytes, never parsed
# Rows no reader could make sense of: a file made only of them is in another format or
# encoding (or compressed under a plain name), and stops the run rather than vanish.
UNREADABLE = (INVALID_JSON, INVALID_UTF8, MALFORMED_ROW)

# Dedup. Evidence: duplicate_of (the kept record), method, similarity, cluster_id, and
# published_in (the parent version) when the kept record was published there.
EXACT_DUPLICATE = "exact_duplicate"
NEAR_DUPLICATE = "near_duplicate"  # MinHash
SEMANTIC_DUPLICATE = "semantic_duplicate"  # embeddings

# Split. `moved` events (non-terminal) say why a record is not where its parent version or
# its own timestamp would put it; evidence {from, to}.
SPLIT_CONFLICT = "split_conflict"  # its component's records were in different parent splits
LOCKED_TEST = "locked_test"  # its component holds a record of the locked test set
GROUP_TIME_CONFLICT = "group_time_conflict"  # its time is on the other side of a cutoff
MISSING_TIMESTAMP = "missing_timestamp"  # time strategies: a record without a time

# Contamination. Evidence: eval_set (a registered set, or "test" for this run's test split),
# item (the eval item's id, or the test record's id), method, score, span (the matched words).
CONTAMINATED_EVAL = "contaminated_eval"

# Governance: license, consent and use terms; secrets; personal data; review; deletion.
LICENSE_NOT_ALLOWED = "license_not_allowed"
LICENSE_UNKNOWN = "license_unknown"
CONSENT_MISSING = "consent_missing"
USE_NOT_ALLOWED = "use_not_allowed"
SECRET_DETECTED = "secret_detected"
PERSONAL_DATA = "personal_data"  # a personal-data type the policy quarantines or drops
PERSONAL_DATA_REDACTED = "personal_data_redacted"  # edit: replaced in place, e.g. <EMAIL>
DELETION_REQUEST = "deletion_request"
REVIEW_REJECTED = "review_rejected"  # a reviewer rejected this content earlier
REVIEW_APPROVED = "review_approved"
SECRET_FALSE_POSITIVE = "secret_false_positive"  # approval of a secret finding

# Quality (pipeline/quality/stage.py). Drops name the rule: Gopher's in datatrove's names
# (gopher_short_doc … gopher_enough_stop_words, dup_para_frac … duplicated_10_n_grams),
# C4's and FineWeb's (pipeline/text/line_rules.py: c4_lorem_ipsum, c4_curly_braces,
# only_removed_lines, fineweb_line_punct, fineweb_short_lines, fineweb_char_duplicates,
# fineweb_list_like), encoding (mojibake, invalid_characters) and language. Evidence: profile,
# language, score, and the measured value against its bound.
LANGUAGE_NOT_ALLOWED = "language_not_allowed"
LANGUAGE_UNCERTAIN = "language_uncertain"
LANGUAGE_REASONS = (LANGUAGE_NOT_ALLOWED, LANGUAGE_UNCERTAIN)
ENCODING_REPAIRED = "encoding_repaired"  # edit at ingest: ftfy repaired mojibake or C1 controls
LINES_REMOVED = "lines_removed"  # edit: C4 line rules removed lines; evidence the rule per line

# Labels (exact and near dedup): a duplicate cluster whose members carry different labels.
# The quarantine's evidence lists every member (record_id, source, label); the edits say
# which label the kept record was given and why, with the labels counted and the minority.
LABEL_CONFLICT = "label_conflict"
LABEL_MAJORITY = "label_majority"  # edit: dedup.label_conflicts is majority
LABEL_ADJUDICATED = "label_adjudicated"  # edit: a reviewer chose the label

# Synthetic sources (pipeline/augment/synthetic.py). Moves out of validation/test use
# SYNTHETIC_HELD_OUT too, with evidence {from, to}.
SYNTHETIC_CAP = "synthetic_cap"  # beyond synthetic.max_share of its split
SYNTHETIC_HELD_OUT = "synthetic_held_out"  # in validation/test, and moving it would leak

# Augmentation (pipeline/augment/augment.py): generated variants of train records.
AUGMENTED = "augmented"  # the `generated` event of a variant; evidence origin, transform, seed
AUGMENTATION_DRIFTED = "augmentation_drifted"  # cosine to its origin below augment.min_cosine
AUGMENTATION_UNCERTAIN = "augmentation_uncertain"  # nearer another label's centroid: review
AUGMENTATION_DUPLICATE = "augmentation_duplicate"  # its text is a record's or an earlier variant's

# Boilerplate (pipeline/dedup/boilerplate.py): segments repeated across many documents.
BOILERPLATE_REMOVED = "boilerplate_removed"  # edit; evidence the segments' hashes and counts
ONLY_BOILERPLATE = "only_boilerplate"  # nothing was left
