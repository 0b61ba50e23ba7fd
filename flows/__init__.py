"""Prefect flows and the `thresher` command line that wire the pipeline together."""

import os

# Offline by default: no telemetry, no model or dataset hub downloads.
for _name, _value in {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "HF_HUB_OFFLINE": "1",
}.items():
    os.environ.setdefault(_name, _value)
