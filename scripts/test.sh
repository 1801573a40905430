#!/usr/bin/env bash
# Run DocAnchor's whole test suite (unit, HTTP, CLI, end-to-end with the real model).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not e2e" -x
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec .venv/bin/python -m pytest "$@"
