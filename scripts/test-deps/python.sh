#!/usr/bin/env bash
# Test-only Python packages: the `test` extra of pyproject.toml (pytest and the tools the tests
# drive; Playwright drives Debian's Chromium, so no browser is downloaded), installed into .venv
# beside the runtime that scripts/install.sh put there.
# Idempotent and quick: a stamp in .venv holds pyproject.toml's checksum, and pip runs only when
# it differs (the first time, or after pyproject.toml changed).
set -euo pipefail
cd "$(dirname "$0")/../.."
stamp=.venv/.docanchor-test-extra
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "==> test setup: the 'test' extra of pyproject.toml (pytest and the tools the tests drive) into .venv"
.venv/bin/python -m pip install --progress-bar on -e ".[test]"
echo "$want" > "$stamp"
