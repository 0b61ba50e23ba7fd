"""`torchrun --nproc-per-node N -m training --config FILE [--dataset HASH|latest] [--resume RUN_DIR]`

Data-parallel training without Prefect: each process is one rank (gloo on CPU, NCCL on GPU).
The same function runs in one process under `thresher train`.
"""

from __future__ import annotations

import argparse
import os
import sys

from pipeline.core.errors import ThresherError
from training.run import train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the run config with its train: section")
    parser.add_argument("--dataset", default=None, help="dataset hash, prefix or latest (default)")
    parser.add_argument("--resume", default=None, help="a training run folder to resume")
    args = parser.parse_args(argv)
    try:
        result = train(args.config, args.dataset, resume=args.resume)
    except ThresherError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(result.manifest_path)
    return 0


if __name__ == "__main__":
    code = main()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # The process group is destroyed and every file written; skip the interpreter's
        # teardown, where gloo's threads can still abort a finished rank ("terminate called
        # without an active exception", seen under load on a 2-core machine).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
