#!/usr/bin/env bash
# Install LobeChat's own plugin SDK and gateway (npm) for tests/test_lobechat_contract.py.
#
# Versions and the whole dependency tree are pinned by tests/node/package.json and
# tests/node/package-lock.json; they are installed with `npm ci` into .cache/lobechat-node/
# (git-ignored). Idempotent: a stamp holding the lockfile's checksum skips the install when the
# folder is already current. Needs node >= 20 and npm with the npm registry reachable; fails
# loudly (non-zero exit, npm's own error) when the install fails.
# Install scripts are not run (--ignore-scripts): the SDK and gateway are plain JavaScript, and
# their optional native/telemetry postinstalls are not needed. React (a peer dependency of the
# SDK's client helpers) is left out (--omit=peer): the server-side SDK and gateway do not load it.
set -euo pipefail
cd "$(dirname "$0")/../.."

SRC=tests/node
DEST=${DOCANCHOR_NODE_DEPS:-.cache/lobechat-node}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "scripts/test-deps/node.sh: '$tool' is not installed; the LobeChat contract tests need Node.js 20+ and npm." >&2
    exit 1
  fi
done

want=$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$DEST/.installed" ] && [ "$(cat "$DEST/.installed")" = "$want" ] \
   && [ -d "$DEST/node_modules/@lobehub/chat-plugins-gateway" ]; then
  exit 0
fi

echo "==> test setup: LobeChat's plugin SDK and gateway (npm ci into $DEST, once)"
mkdir -p "$DEST"
rm -f "$DEST/.installed"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
if ! log=$(cd "$DEST" && npm ci --ignore-scripts --omit=peer --no-audit --no-fund --loglevel=error 2>&1); then
  echo "$log" >&2
  echo "scripts/test-deps/node.sh: npm ci failed in $DEST (see above); is the npm registry reachable?" >&2
  exit 1
fi
echo "$want" > "$DEST/.installed"
echo "LobeChat plugin SDK and gateway installed in $DEST"
