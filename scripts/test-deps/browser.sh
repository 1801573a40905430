#!/usr/bin/env bash
# Test-only: a headless Chromium for tests/test_upload_page.py (the upload page in a real browser).
# Debian's own `chromium` package; Playwright (the `test` extra, scripts/test-deps/python.sh)
# drives it through executable_path, so no browser is ever downloaded (`playwright install` is
# never run). Idempotent: does nothing when /usr/bin/chromium is there.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  echo "==> test setup: Debian's chromium and a font (apt-get, once)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
fi
