"""Prefect flows and the `thresher` command line that wire the pipeline together."""

import os

# Offline by default: no telemetry, no model or dataset hub downloads.
for _name, _value in {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "HF_HUB_OFFLINE": "1",
    # a first start of the temporary Prefect server (its database created) can take longer
    # than Prefect's 20 s on a busy 2-core machine, and the run then failed (issue 23)
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}.items():
    os.environ.setdefault(_name, _value)
