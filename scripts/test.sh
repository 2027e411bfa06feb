#!/usr/bin/env bash
# Install what is needed (Chromium included) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two workers, a test file each at a time (-n 2 --dist loadfile: a file's fixtures are made once):
# alone, the suite leaves a core idle a third of its time, waiting on browsers and app servers.
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=20 "$@"
