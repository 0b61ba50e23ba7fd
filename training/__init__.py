"""The torch training stage: trains only on a verified published version (its own issue).

It opens versions through `data_catalog.open_version`, which re-hashes every shard first.
"""
