#!/usr/bin/env bash
# The project's test command: lint, strict type check, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
$BIN/ruff check gateway audit tests bench
$BIN/mypy
exec $BIN/pytest "$@"
