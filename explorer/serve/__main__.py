"""``python -m explorer.serve --replicas 2 --port 8080``: the app N times behind nginx, until stopped.

Options other than these go to nobody: each replica reads the same environment variables as
``python app.py`` does (the model, the text, DECODER_EXPLORER_DATABASE_URL, ...).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from explorer.serve.arguments import MAX_REPLICAS
from explorer.serve.replicas import RESTART_DELAY_S, ServeError, Supervisor


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/serve.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=2, help=f"how many app processes, 1 to {MAX_REPLICAS} (default: 2)")
    p.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   help="where nginx listens (default: %(default)s; 0.0.0.0 for every interface)")  # fmt: skip
    p.add_argument("--port", type=int, default=os.environ.get("GRADIO_SERVER_PORT", "7860"),
                   help="nginx's port, the one browsers use (default: %(default)s)")  # fmt: skip
    p.add_argument("--threads", type=int, help="PyTorch threads per replica (default: the cores shared out)")
    p.add_argument("--restart-delay", type=float, default=RESTART_DELAY_S, metavar="SECONDS",
                   help="how long after a replica ended it is started again (default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--run-dir", type=Path, help="where nginx's configuration and every log go (default: a new temporary folder)"
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="decoder-explorer-serve-"))
    try:
        supervisor = Supervisor(
            args.replicas, args.port, args.host, run_dir.resolve(), args.threads, args.restart_delay
        )
    except ServeError as error:
        sys.exit(f"Cannot start the replicas: {error}")
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        supervisor.start()
        print(f"Decoder Explorer: {args.replicas} replicas behind nginx on {supervisor.url} "
              f"(configuration and logs in {run_dir}); Ctrl+C stops everything", flush=True)  # fmt: skip
        while not stopping.wait(1.0):
            supervisor.check_once()
    except (ServeError, ValueError) as error:  # (ValueError: nginx refused its configuration)
        print(f"Stopping: {error}", file=sys.stderr, flush=True)
        supervisor.stop()
        sys.exit(1)
    supervisor.stop()


if __name__ == "__main__":
    main()
