#!/usr/bin/env bash
# The project's test command: lint, strict type check, then every test.
# PostgreSQL is started by the tests themselves (tests/support/postgres.py).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

# The replay report test opens the HTML report in headless Chromium. Install Debian's package
# when it is missing and we may (CI runs as root); otherwise that one test skips, saying why.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium for the HTML report test ..." >&2
  timeout 300 apt-get install -y -q chromium >/dev/null 2>&1 \
    || (timeout 120 apt-get update -q >/dev/null 2>&1 && timeout 300 apt-get install -y -q chromium >/dev/null 2>&1) \
    || echo "chromium could not be installed; the HTML report browser test will skip" >&2
fi

$BIN/ruff check gateway audit tests bench verifier
$BIN/mypy
exec $BIN/pytest "$@"
