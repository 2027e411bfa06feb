#!/usr/bin/env bash
# Install what is needed (nginx included) and serve the explorer from several processes behind nginx.
#   DECODER_EXPLORER_BROWSER_SECRET=... bash scripts/serve.sh --replicas 2 --port 8080
# Everything it started stops with Ctrl+C. How it works: docs/replicas.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nginx > /dev/null && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ]; then apt_get="apt-get"; else apt_get="sudo apt-get"; fi
  echo "Installing Debian's nginx"
  $apt_get update -qq
  DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq nginx > /dev/null
fi
bash scripts/install.sh
exec .venv/bin/python -m explorer.serve "$@"
