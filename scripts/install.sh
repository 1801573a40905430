#!/usr/bin/env bash
# Install DocAnchor into ./.venv. Shared by the README's first command and .ci/run.
# torch is pinned first: an unpinned torch (pulled in by sentence-transformers) downloads a
# multi-GB CUDA build; 2.13.0 is the CPU build these machines carry.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[test]"
echo "DocAnchor installed in .venv ($(.venv/bin/docanchor --version 2>/dev/null || echo 'docanchor'))"
