"""The catalog: datasets, versions, shards, sources and runs, in SQLite (or any SQL database)."""

from data_catalog.catalog import Catalog, VersionRecord, open_version

__all__ = ["Catalog", "VersionRecord", "open_version"]
