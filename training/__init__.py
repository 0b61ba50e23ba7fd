"""The torch training stage: trains only on a verified published version, reproducibly,
and records what it trained on in a run manifest (see README, "Training").

It opens versions through `data_catalog.open_version`, which re-hashes every shard first.
"""
