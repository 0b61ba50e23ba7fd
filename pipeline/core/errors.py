"""The few named errors Thresher raises. Every message names what is wrong and what to do."""


class ThresherError(Exception):
    """Base class: the CLI turns these into a clear message and exit code 2."""


class ConfigError(ThresherError):
    """The run config or a source declaration is invalid."""


class DataError(ThresherError):
    """Input or published data cannot be used as it is (missing file, bad column, bad hash)."""


class AccountingError(DataError):
    """Records were lost or counted twice between ingest and the terminal events."""


class RetryableError(ThresherError):
    """A transient failure (locked database, flaky filesystem): safe to retry."""
