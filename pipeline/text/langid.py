"""Language identification offline: py3langid's bundled model (ISO 639 codes: mostly two
letters, three where ISO 639-1 has none, e.g. pcm for Nigerian Pidgin).

One Python call per record (~30k short texts/s on one core): the only per-record loop of the
quality stage, and it runs only over the records whose language is judged.
"""

from __future__ import annotations

from functools import cache

import polars as pl

LANGUAGE_SCHEMA = {"language": pl.String, "language_score": pl.Float64}


@cache
def _identifier():
    from py3langid.langid import _load_identifier

    return _load_identifier(norm_probs=True)  # scores are probabilities over its languages


def identify(texts: pl.Series) -> pl.DataFrame:
    """Language code and probability per text (null for a null text)."""
    classify = _identifier().classify
    found = [classify(text) if text is not None else (None, None) for text in texts]
    return pl.DataFrame(found, schema=LANGUAGE_SCHEMA, orient="row")
