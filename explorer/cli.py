"""The command that starts the app: ``decoder-explorer`` (once installed with pip),
``python -m explorer``, ``python app.py``.

    decoder-explorer --model en-de-numbers --text "twenty-one" --port 7861

Each option sets what the app reads at start (the environment variables a Space sets), so the
command line and a Space's settings mean the same; ``--help`` prints them and starts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from explorer import native_memory
from explorer.loading import cache_root, list_models
from explorer.present import session_keeper
from explorer.present.model_store import (
    MODEL_DIRS_ENV,
    MODEL_ENV,
    MODEL_MEMORY_ENV,
    MODEL_MEMORY_MB,
    MODELS_ENV,
    default_model_name,
)
from explorer.ui.layout import TEXT_ENV


def program_name() -> str:
    """How the user started it, for --help and error messages."""
    started = Path(sys.argv[0]).name
    return "python -m explorer" if started == "__main__.py" else started


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=program_name(),
        description="Decoder Explorer: step through a transformer's generation in the browser.",
    )
    p.add_argument("--model", help=f"the model the page opens with (default: {default_model_name()})")
    p.add_argument("--text", help="the prompt (or source sentence) the page opens with")
    p.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   help="the address to listen on (default: %(default)s; 0.0.0.0 for every interface)")  # fmt: skip
    p.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)),
                   help="the port (default: %(default)s)")  # fmt: skip
    p.add_argument("--share", action="store_true", help="also ask Gradio for a public share link (needs the network)")
    p.add_argument("--allow-dir", action="append", default=[], metavar="FOLDER",
                   help="a folder whose checkpoint folders a user may open by path (repeat for more)")  # fmt: skip
    p.add_argument("--models", default=os.environ.get(MODELS_ENV), metavar="A,B,C",
                   help="the models a visitor may load, comma-separated (default: all offered)")  # fmt: skip
    p.add_argument("--model-memory-mb", type=positive(int), default=os.environ.get(MODEL_MEMORY_ENV), metavar="N",
                   help=f"the loaded models' memory budget; past it, the least recently used model that no session "
                   f"uses is freed (default: {MODEL_MEMORY_MB:,})")  # fmt: skip
    sessions = p.add_argument_group(
        "every visitor's sessions (each also DECODER_EXPLORER_ and its name, e.g. DECODER_EXPLORER_SESSION_MEMORY_MB)"
    )
    sessions.add_argument("--session-memory-mb", type=positive(float), metavar="N",
                          help="the memory all sessions' caches may hold together; past it the least recently "
                               "used idle session is put aside and read again from its tokens "
                               f"(default: {session_keeper.MEMORY_MB})")  # fmt: skip
    sessions.add_argument("--session-idle-minutes", type=positive(float), metavar="M",
                          help="a session unused this long is released, heartbeat or not "
                               f"(default: {session_keeper.IDLE_MINUTES:g})")  # fmt: skip
    sessions.add_argument("--sessions-per-address", type=positive(int), metavar="K",
                          help="live sessions one client address may hold; past it its least recently used idle "
                               f"one is put aside (default: {session_keeper.PER_ADDRESS})")  # fmt: skip
    return p


# Each session option and the environment variable it sets (what a Space's settings set).
SESSION_OPTIONS = {
    "session_memory_mb": session_keeper.MEMORY_ENV,
    "session_idle_minutes": session_keeper.IDLE_ENV,
    "sessions_per_address": session_keeper.PER_ADDRESS_ENV,
}


def positive(kind: type):
    """An argparse type: a number of ``kind`` above 0, else a one-line refusal."""

    def parsed(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0")
        return value

    parsed.__name__ = kind.__name__
    return parsed


def apply(args: argparse.Namespace) -> None:
    """Set what the options say for the app to read."""
    if args.model:
        os.environ[MODEL_ENV] = args.model
    if args.text:
        os.environ[TEXT_ENV] = args.text
    if args.allow_dir:
        folders = [str(Path(folder).expanduser().resolve()) for folder in args.allow_dir]
        os.environ[MODEL_DIRS_ENV] = os.pathsep.join(folders)
    # (A notebook's open_app passes only the first three: the others keep what the environment says.)
    if getattr(args, "models", None):
        os.environ[MODELS_ENV] = args.models
    if getattr(args, "model_memory_mb", None):
        os.environ[MODEL_MEMORY_ENV] = str(args.model_memory_mb)
    for option, env in SESSION_OPTIONS.items():
        if getattr(args, option, None) is not None:
            os.environ[env] = f"{getattr(args, option):g}"


def unknown_model(name: str) -> str | None:
    """What is wrong with a model name for the page to open with, or None when it is one of the page's list."""
    names = [entry.name for entry in list_models()]
    if name in names:
        return None
    return f"{name}: not one of {', '.join(names)} (a folder or a Hub id opens from the page)"


def unknown_offered(models: str) -> str | None:
    """What is wrong with a list of models to offer, or None when each is one of the registry's."""
    names = [entry.name for entry in list_models()]
    listed = [name.strip() for name in models.split(",") if name.strip()]
    wrong = next((name for name in listed if name not in names), None)
    if not listed or wrong is not None:
        return f"{wrong or models!r}: name models of {', '.join(names)}, separated by commas"
    return None


def summary(args: argparse.Namespace) -> str:
    lines = [
        f"Decoder Explorer on http://{args.host}:{args.port}"
        + (" (and a share link, if the network allows)" if args.share else ""),
        f"  model: {default_model_name()}",
        f"  converted checkpoints are cached in {cache_root()}",
        f"  sessions: {session_keeper.memory_budget_bytes() / 2**20:g} MB of caches in all, released after "
        f"{session_keeper.idle_seconds() / 60:g} minutes unused, "
        f"{session_keeper.sessions_per_address()} live per address",
    ]
    if args.allow_dir:
        lines.append(f"  checkpoint folders may be opened from: {os.environ[MODEL_DIRS_ENV]}")
    if args.models:
        lines.append(f"  models offered: {args.models}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    command = parser()
    args = command.parse_args(argv)
    missing = [folder for folder in args.allow_dir if not Path(folder).expanduser().is_dir()]
    if missing:
        command.error(f"--allow-dir {missing[0]}: no such folder")
    if args.model and (problem := unknown_model(args.model)):
        command.error(f"--model {problem}")
    if args.models and (problem := unknown_offered(args.models)):
        command.error(f"--models {problem}")
    if args.model and args.models and args.model not in [name.strip() for name in args.models.split(",")]:
        command.error(f"--model {args.model}: not among --models {args.models}")
    apply(args)
    native_memory.fewer_malloc_arenas()  # before the server starts its threads
    print(summary(args), flush=True)
    from explorer.ui.app import launch  # after the options are set: the page reads them as it is built

    launch(server_name=args.host, server_port=args.port, share=args.share)


def start_inline(args: argparse.Namespace, height: int, port: int | None):
    """The page served in the background from this process and shown in a notebook's cell
    (``explorer.notebook.open_app``); ``.close()`` on what it returns stops it."""
    apply(args)
    from explorer.ui.app import start  # after the options are set: the page reads them as it is built

    return start(inline=True, height=height, server_port=port, quiet=True)
