#!/usr/bin/env bash
# The main job on embedded defaults: review the shipped policies.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
$BIN/gateway policy review policies/
