"""Publish this repository as a Hugging Face Space: the files git tracks, the weights through LFS.

    .venv/bin/python scripts/publish_space.py --dry-run                  # what would go, and how
    HF_TOKEN=hf_... .venv/bin/python scripts/publish_space.py you/decoder-explorer

A plain ``git push`` to a Space is refused ("Your push was rejected because it contains files
larger than 10 MiB"): the Hub takes no file of 10 MiB or more outside Git LFS, and this
repository's history holds the translator's 16 MB weights as a plain file, so that it clones and
tests without git-lfs. ``huggingface_hub``'s ``upload_folder`` sends the files over HTTP instead
and stores the large ones through LFS by itself; ``.gitattributes`` goes with them, so that the
Space's own repository keeps the weights in LFS for whoever clones or edits it there.

Only the files ``git ls-files`` lists go (``upload_folder`` alone would send .venv, caches and test
artifacts: it does not read .gitignore). The Space is created (a Gradio Space) if it does not exist.
"""

from __future__ import annotations

import argparse
import glob
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HUB_FILE_LIMIT = 10 * 1024 * 1024  # bytes: the Hub refuses a file this big that Git LFS does not carry


@dataclass(frozen=True)
class Upload:
    path: str  # relative to the repository's root, as git names it
    size: int  # bytes
    lfs: bool  # whether .gitattributes sends it through Git LFS


def tracked_files(root: Path = ROOT) -> list[str]:
    """Every file git tracks in ``root``'s checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0") if name]


def through_lfs(paths: list[str], root: Path = ROOT) -> set[str]:
    """Those of ``paths`` that .gitattributes gives ``filter=lfs`` (``git check-attr``; a path
    need not exist)."""
    asked = subprocess.run(
        ["git", "check-attr", "-z", "--stdin", "filter"], cwd=root, input="\0".join(paths).encode() + b"\0",
        capture_output=True, check=True,
    )  # fmt: skip
    fields = asked.stdout.decode().split("\0")  # path, attribute, value, path, ...
    return {path for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False) if value == "lfs"}


def planned_uploads(root: Path = ROOT) -> list[Upload]:
    """What publishing sends: each tracked file, its size, and whether it goes through LFS."""
    paths = tracked_files(root)
    lfs = through_lfs(paths, root)
    return [Upload(path, (root / path).stat().st_size, path in lfs) for path in paths if (root / path).is_file()]


def refused_by_the_hub(uploads: list[Upload]) -> list[Upload]:
    """The files a git push to the Hub would be refused for: 10 MiB or more, outside LFS."""
    return [upload for upload in uploads if upload.size >= HUB_FILE_LIMIT and not upload.lfs]


def publish(repo_id: str, uploads: list[Upload], root: Path = ROOT, private: bool = False):
    """Create the Space ``repo_id`` if needed and upload ``uploads`` to it in one commit; its CommitInfo."""
    from huggingface_hub import HfApi

    api = HfApi()  # the token: $HF_TOKEN, or the one `hf auth login` saved
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    return api.upload_folder(
        repo_id=repo_id, repo_type="space", folder_path=root,
        allow_patterns=[glob.escape(upload.path) for upload in uploads],  # exactly these ([ or * kept literal)
        commit_message="Publish Decoder Explorer (scripts/publish_space.py)",
    )  # fmt: skip


def described(uploads: list[Upload]) -> str:
    total = sum(upload.size for upload in uploads)
    lines = [f"{len(uploads)} files, {total / 1e6:.1f} MB; through Git LFS:"]
    lines += [f"  {upload.path} ({upload.size / 1e6:.1f} MB)" for upload in uploads if upload.lfs]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Publish this repository as a Hugging Face Space.")
    parser.add_argument("repo_id", nargs="?", help="the Space, owner/name (not needed with --dry-run)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be uploaded; upload nothing")
    parser.add_argument("--private", action="store_true", help="a new Space is private")
    args = parser.parse_args(argv)
    uploads = planned_uploads()
    print(described(uploads))
    refused = refused_by_the_hub(uploads)
    if refused:
        names = ", ".join(upload.path for upload in refused)
        print(f"the Hub would refuse {names}: 10 MiB or more and not in .gitattributes' LFS patterns; add one")
        return 1
    if args.dry_run:
        return 0
    if not args.repo_id:
        parser.error("name the Space (owner/name), or pass --dry-run")
    info = publish(args.repo_id, uploads, private=args.private)
    print(f"published: {info.commit_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
