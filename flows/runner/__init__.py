"""The executor: where a run's steps run (flows/runner/workers.py) and how many records each
part of a stage holds. The `curate` flow decides what runs; this package decides where."""
