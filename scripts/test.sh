#!/usr/bin/env bash
# Run DocAnchor's whole test suite (unit, HTTP, CLI, end-to-end with the real model, LobeChat's
# own SDK and gateway in Node, a headless browser, MCP, a real Chroma server).
# First makes sure DocAnchor (scripts/install.sh, when there is no .venv yet) and the test-only
# tools exist: the `test` extra, Debian's Chromium and LobeChat's npm packages
# (scripts/test-deps/*.sh; each is idempotent, prints a line when it installs, and is quick when
# everything is there). Extra arguments go to pytest, e.g. scripts/test.sh -m "not e2e" -x
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/install.sh
for dep in scripts/test-deps/*.sh; do
  [ -e "$dep" ] || continue
  bash "$dep"
done
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec .venv/bin/python -m pytest "$@"
