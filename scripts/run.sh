#!/usr/bin/env bash
# The main job on embedded defaults, offline: no network and no API key needed.
#
#   make run                      # or: scripts/run.sh after `make setup`
#   KEEP_AUDIT_DB=1 make run      # keep the audit database and print where it is
#   GATEWAY_RUN_CLAUDE=1 make run # with ANTHROPIC_API_KEY set, also ask Claude once
#
# The audit database lives in a fresh temporary folder, not ./gateway-audit.db: every run then
# starts from an empty log, so the replay step really shows a first answer being recorded and
# the second being served from the log, and the job never leaves files in the checkout or
# mixes its demo records into a log someone is keeping.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${GATEWAY_BIN:-.venv/bin} # `make run`: its lean .venv-run (no dev extras)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gateway-run.XXXXXX")
if [[ "${KEEP_AUDIT_DB:-0}" == "1" ]]; then
    trap 'echo "audit database kept at $WORK/gateway-audit.db"' EXIT
else
    trap 'rm -rf "$WORK"' EXIT
fi
export GATEWAY_DATABASE_URL="sqlite:///$WORK/gateway-audit.db"
# The record key that signs every audit event is made on first use as $WORK/gateway-record.key
# (mode 0600), beside the database and never in it. A bank sets GATEWAY_RECORD_KEY_FILE to a
# key held in an HSM/KMS-backed secret store and gives auditors the public key.
export GATEWAY_POLICY_DIR=policies
export GATEWAY_DURABILITY=os # a throwaway demo log: survive a process crash, skip the fsyncs
# The policy lets callers lower max_tokens to 256; the demo answer needs no more.
SHORT="--override max_tokens=256"
QUESTION="Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."

step() { printf '\n== %s\n' "$*"; }

step "review the shipped policies"
$BIN/gateway policy review policies/

step "ask compliance_review offline (recorded)"
$BIN/gateway ask --offline compliance_review "$QUESTION" --caller run-sh $SHORT

step "ask the same question again (served from the replay cache)"
$BIN/gateway ask --offline compliance_review "$QUESTION" --caller run-sh $SHORT

step "ask offline_demo on the local model, streamed (text as it arrives)"
$BIN/gateway ask --stream offline_demo "The reviewer reads the" --caller run-sh

step "sanctions_screening offline: the model answers with a call of its lookup_entity tool"
$BIN/gateway ask --offline sanctions_screening "ACME Shipping Ltd, Panama" --caller run-sh --format json

step "a short sampling experiment (every sample audited)"
$BIN/gateway experiment offline_demo --prompt "The reviewer reads the" -n 4

if [[ "${GATEWAY_RUN_CLAUDE:-0}" == "1" && -n "${ANTHROPIC_API_KEY:-}" ]]; then
    step "ask compliance_review on Claude"
    $BIN/gateway ask compliance_review "$QUESTION" --caller run-sh
fi

step "the audit log"
$BIN/gateway audit list

step "replay --verify: every recorded request re-planned under its recorded policy"
$BIN/gateway replay --verify

step "a model-migration report: what would change on claude-opus-5-5 (offline, no calls)"
$BIN/gateway replay --task compliance_review --model claude-opus-5-5 --limit 1

step "sign a checkpoint of the head (a throwaway Ed25519 key for the demo)"
export GATEWAY_CHECKPOINT_KEY=$($BIN/python -c 'import secrets; print(secrets.token_hex(32))')
$BIN/gateway audit checkpoint -o "$WORK/head.json"

step "verify the hash chain and that the log still extends the checkpoint"
$BIN/gateway audit verify --checkpoint "$WORK/head.json"
