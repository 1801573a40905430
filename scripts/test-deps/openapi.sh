#!/usr/bin/env bash
# Test-only: openapi-python-client for tests/test_openapi_client.py, in a virtual environment of
# its own (.cache/openapi-generator/, git-ignored), not in .venv: every release so far (0.29.1
# too) caps httpx <0.29 and typer <0.28, so installing it beside the runtime downgraded the
# httpx and typer that chromadb uses. The test runs it as a command; the client it generates is
# imported in .venv and runs on the runtime's httpx.
# Idempotent and quick: a stamp holds the requirement, and pip runs only when it differs.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
want="openapi-python-client>=0.29,<0.30"
dest=.cache/openapi-generator
if [ -f "$dest/.installed" ] && [ "$(cat "$dest/.installed")" = "$want" ] && [ -x "$dest/bin/openapi-python-client" ]; then
  exit 0
fi
echo "==> test setup: $want in a venv of its own ($dest; its httpx and typer caps stay out of .venv)"
[ -x "$dest/bin/python" ] || "$PYTHON" -m venv "$dest"
"$dest/bin/python" -m pip install --progress-bar on --quiet "$want"
echo "$want" > "$dest/.installed"
