#!/usr/bin/env bash
# Test-only: a headless Chromium for tests/test_upload_page.py (the upload page in a real browser).
# Debian's own `chromium` package; Playwright (the `test` extra) drives it through
# executable_path, so no browser is ever downloaded (`playwright install` is never run).
# Idempotent: does nothing when /usr/bin/chromium and the Playwright package are there.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
# The `test` extra carries playwright; a .venv made before it was added gets it here.
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import playwright" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet "playwright>=1.45,<2"
fi
