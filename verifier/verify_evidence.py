#!/usr/bin/env python3
"""Verify compliance-gateway evidence without the gateway: Python 3.11+ and `cryptography`.

    python verify_evidence.py export audit.jsonl --keys public-keys.json
    python verify_evidence.py receipt receipt.json --keys public-keys.json
    python verify_evidence.py checkpoint head.json --keys public-keys.json

Exit 0: intact; 1: a defect (each printed with its line, seq and kind); 2: unusable input.
``--keys`` is the file `gateway keys public --out FILE` writes; ``--record-key``,
``--checkpoint-key`` and ``--integrator-key`` (hex, or a file of keys one a line) add keys.
Every rule applied here is written down in docs/evidence-format.md; this file is one
independent reading of it, kept apart from the gateway's code on purpose.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = "sha256:" + "0" * 64
DOMAIN_1 = b"compliance-gateway audit event v1\n"
DOMAIN_2 = b"compliance-gateway audit event v2 (sequenced)\n"
# An exported record's keys, and those that must equal the same field of the hashed body.
COLUMNS = ("seq event_id request_id kind recorded_at task caller policy_fingerprint "  # noqa: SIM905
           "request_hash prev_hash hash signature key_id body").split()  # fmt: skip
MIRRORED = [*COLUMNS[1:9], "seq"]
# The fields an integrator checkpoint's JSON signature covers (JCS: sorted keys, no spaces).
SIGNED = "version store_id seq hash created_at public_key tree_size root note verified".split()  # noqa: SIM905
OUTCOMES = {"response", "failed", "cancelled", "cache_hit"}
SHOWN = ("request_body", "response_body", "partial_response")
ORIGIN = "compliance-gateway.audit/"
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
MARK = b"\\u0000attachment:"
SEAL_MARK = b"\x00\xffgateway-sealed-1\x00"  # audit.sealing: content stored behind a salt


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def key_bytes(text: str) -> bytes | None:
    text = text.strip()
    try:
        raw = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return None
    return raw if len(raw) == 32 else None


class Keys:
    """Trusted Ed25519 public keys by key id (``ed25519:`` + 16 hex of sha256(key))."""

    def __init__(self, texts: list[str]) -> None:
        self.raw: dict[str, bytes] = {}
        for text in texts:
            raw = key_bytes(text)
            if raw is None:
                raise ValueError(f"{text[:12]}... is not an Ed25519 public key (hex)")
            self.raw["ed25519:" + hashlib.sha256(raw).hexdigest()[:16]] = raw

    def hexes(self) -> set[str]:
        return {r.hex() for r in self.raw.values()}

    def check(self, kid: Any, signature: Any, message: bytes) -> str | None:
        if not isinstance(signature, str):
            return "unsigned"
        raw = self.raw.get(kid) if isinstance(kid, str) else None
        if raw is None:
            return "untrusted_signer"
        return None if ed25519_ok(raw, signature, message) else "bad_signature"


def ed25519_ok(raw: bytes, signature_b64: str, message: bytes) -> bool:
    try:
        sig = base64.b64decode(signature_b64, validate=True)
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, message)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


def record_message(event_hash: Any, store: Any, sequenced: bool) -> bytes:
    """What a record signature signs: format 1 its hash; format 2 (sequenced) its store and
    hash, each under its own domain."""
    if sequenced:
        return DOMAIN_2 + f"store {store}\n{event_hash}".encode("ascii", "replace")
    return DOMAIN_1 + str(event_hash).encode("ascii", "replace")


def leaf(event_hash: str) -> bytes:
    prefix, _, hexdigest = str(event_hash).partition(":")
    if prefix != "sha256" or len(hexdigest) != 64:
        raise ValueError("not a sha256 hash")
    return hashlib.sha256(b"\x00" + bytes.fromhex(hexdigest)).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Frontier:
    """The RFC 9162 Merkle root of the leaves added so far, in O(log n) memory."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, bytes]] = []
        self.size = 0

    def add(self, item: bytes) -> None:
        level = 0
        while self.stack and self.stack[-1][0] == level:
            item, level = node(self.stack.pop()[1], item), level + 1
        self.stack.append((level, item))
        self.size += 1

    def root(self) -> bytes:
        acc = self.stack[-1][1] if self.stack else hashlib.sha256(b"").digest()
        for _, left in reversed(self.stack[:-1]):
            acc = node(left, acc)
        return acc


def inclusion_root(item: bytes, index: int, size: int, proof: list[bytes]) -> bytes | None:
    """RFC 9162 §2.1.3.2: the root that ``proof`` leads to from leaf ``index`` of ``size``."""
    if index >= size:
        return None
    fn, sn, acc = index, size - 1, item
    for p in proof:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            acc = node(p, acc)
            while fn % 2 == 0 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            acc = node(acc, p)
        fn, sn = fn >> 1, sn >> 1
    return acc if sn == 0 else None


def open_note(note: str, origin: str, keys: Keys) -> tuple[int, str, bytes] | str:
    """A C2SP signed note's tree size, base64 root and signer, or why it does not check out."""
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        return "not a signed note"
    text = note[: cut + 1]
    for line in note[cut + 2 : -1].split("\n"):
        _, _, rest = line.partition(" ")
        name, _, b64 = rest.partition(" ")
        try:
            blob = base64.b64decode(b64, validate=True)
        except (ValueError, binascii.Error):
            return "a malformed signature line"
        for raw in keys.raw.values():
            kid = hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4]
            if name == origin and blob[:4] == kid:
                sig = base64.b64encode(blob[4:]).decode()
                if not ed25519_ok(raw, sig, text.encode("utf-8")):
                    return "its signature does not match its text"
                lines = text[:-1].split("\n")
                if len(lines) < 3 or lines[0] != origin or not lines[1].isdigit():
                    return "not a tree checkpoint of this origin"
                return int(lines[1]), lines[2], raw
    return "signed by no trusted key"


def checkpoint_problem(cp: Any, keys: Keys) -> tuple[str, int, str] | str:
    """Any checkpoint file (tree head, receipt's, `audit checkpoint` version 2): its origin,
    size and root once its note checks out and its fields say what the note says."""
    if not isinstance(cp, dict) or not isinstance(cp.get("note"), str):
        return "no signed note (a version 1 `audit checkpoint` file has none)"
    origin = str(cp.get("origin") or ORIGIN + str(cp.get("store_id")))
    size = cp.get("tree_size")
    if not isinstance(size, int):
        return "it names no tree size"
    opened = open_note(cp["note"], origin, keys)
    if isinstance(opened, str):
        return opened
    if opened[0] != size or opened[1] != cp.get("root") or opened[2].hex() != cp.get("public_key"):
        return "its tree_size, root or public_key differ from its signed note"
    if "seq" in cp and cp.get("seq") != size:
        return "its seq is not its tree size"
    return origin, size, opened[1]


class Walk:
    def __init__(self, head: dict[str, Any], keys: Keys, integrators: Keys) -> None:
        self.keys, self.integrators = keys, integrators
        self.defects: list[tuple[int, int | None, str, str]] = []
        found = head.get("data")
        data: dict[str, Any] = found if isinstance(found, dict) else {}
        era = data.get("sequenced_from")
        self.era = era if isinstance(era, int) and not isinstance(era, bool) and era > 0 else None
        self.store_id, self.linked = data.get("store_id"), data.get("linked_seq") or 0
        self.filtered, self.content = bool(data.get("filters")), data.get("with_content") is True
        self.count, self.gaps = 0, 0
        self.first: int | None = None
        self.last: int | None = None
        self.last_hash: Any = None
        self.digest, self.frontier = hashlib.sha256(), None if self.filtered else Frontier()
        self.link: str | None = GENESIS
        self.unanswered: dict[str, tuple[int, Any]] = {}
        self.answered: set[str] = set()
        self.content_checked = 0

    def bad(self, line: int, seq: Any, kind: str, detail: str) -> None:
        self.defects.append((line, seq if isinstance(seq, int) else None, kind, detail))

    def sequenced(self, seq: Any) -> bool:
        return self.era is not None and isinstance(seq, int) and seq >= self.era

    def event(self, line: int, rec: dict[str, Any], what: str = "") -> dict[str, Any]:
        seq = rec.get("seq")
        missing = [c for c in COLUMNS if c not in rec]
        if missing:
            self.bad(line, seq, "bad_record", f"{what}missing {', '.join(missing)}")
            return {}
        body, prev, stored = rec["body"], rec["prev_hash"], rec["hash"]
        if not all(isinstance(v, str) for v in (body, prev, stored)):
            self.bad(line, seq, "bad_record", f"{what}body, prev_hash and hash must be text")
            return {}
        if not prev.isascii() or sha(prev.encode() + body.encode("utf-8")) != stored:
            self.bad(line, seq, "hash_mismatch", f"{what}hash is not sha256(prev_hash || body)")
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        ok = isinstance(parsed, dict) and parsed.get("v") == 1
        if not ok or not TIME.fullmatch(str(parsed.get("recorded_at"))):
            self.bad(line, seq, "bad_body", f"{what}body does not parse as a version 1 body")
            return {}
        wrong = [c for c in MIRRORED if rec.get(c) != parsed.get(c)]
        if wrong:
            self.bad(line, seq, "column_mismatch", f"{what}column(s) {', '.join(wrong)} differ")
        self.signature(line, rec, seq, what)
        return dict(parsed)

    def signature(self, line: int, rec: dict[str, Any], seq: Any, what: str) -> None:
        keys, sequenced = self.keys, self.sequenced(seq)
        message = record_message(rec["hash"], self.store_id, sequenced)
        if sequenced:
            if rec.get("prev_hash") != "":
                self.bad(line, seq, "hash_mismatch", f"{what}a format-2 event carries a prev_hash")
            signer_is_integrator = rec.get("key_id") in self.integrators.raw
            if rec.get("kind") == "void" and signer_is_integrator:
                keys = self.integrators
            elif signer_is_integrator:
                self.bad(line, seq, "untrusted_signer", f"{what}an integrator key signed it")
                return
        problem = keys.check(rec.get("key_id"), rec.get("signature"), message)
        if problem is not None:
            self.bad(line, seq, problem, f"{what}record signature: {problem}")

    def row(self, line: int, rec: dict[str, Any]) -> None:
        self.event(line, rec)
        self.content_row(line, rec)
        seq = rec.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return
        follows = self.last is not None and seq == self.last + 1
        if self.last is not None:
            if seq <= self.last:
                self.bad(line, seq, "sequence", f"seq {seq} does not follow seq {self.last}")
            elif follows and not self.sequenced(seq) and rec.get("prev_hash") != self.last_hash:
                self.bad(line, seq, "broken_link", f"prev_hash is not seq {self.last}'s hash")
            elif seq > self.last + 1:
                self.gaps += 1
        if self.last is None or seq > self.last:
            self.chain(line, seq, rec, follows)
        self.first = seq if self.first is None else self.first
        self.last, self.last_hash = seq, rec.get("hash")
        self.count += 1
        self.digest.update(str(rec.get("hash")).encode("utf-8") + b"\n")

    def chain(self, line: int, seq: int, rec: dict[str, Any], follows: bool) -> None:
        """Format 2: links, and the integrator checkpoints carried at their size."""
        if self.frontier is not None:
            try:
                if seq != self.frontier.size + 1:
                    raise ValueError
                self.frontier.add(leaf(str(rec.get("hash"))))
            except ValueError:
                self.frontier = None
        if not self.sequenced(seq):
            self.link = rec.get("hash")
            return
        prev, link = rec.get("link_prev"), rec.get("link")
        if link is None:
            if seq <= self.linked:
                self.bad(line, seq, "broken_link", "linked when exported, but carries no link")
            if "integrator_checkpoint" in rec:
                self.bad(line, seq, "checkpoint", "an integrator checkpoint on an unlinked seq")
            self.link = None
            return
        if not isinstance(prev, str) or not isinstance(link, str):
            self.bad(line, seq, "bad_record", "link_prev and link must be text")
            self.link = None
            return
        if link != sha((prev + str(rec.get("hash"))).encode("ascii", "replace")):
            self.bad(line, seq, "hash_mismatch", "its link is not sha256(link_prev || hash)")
        elif (follows or seq == 1) and prev != (self.link if follows else GENESIS):
            self.bad(line, seq, "broken_link", "its link does not follow the previous one")
        self.link = link
        if "integrator_checkpoint" in rec:
            self.integrator_checkpoint(line, seq, link, rec["integrator_checkpoint"])

    def integrator_checkpoint(self, line: int, seq: int, link: str, carried: Any) -> None:
        cp = json.loads(carried) if isinstance(carried, str) else carried
        text = json.dumps({k: cp.get(k) for k in SIGNED}, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)  # fmt: skip
        raw = key_bytes(str(cp.get("public_key")))
        try:
            sig = base64.b64encode(bytes.fromhex(str(cp.get("signature")))).decode()
        except ValueError:
            sig = ""
        trusted = raw is not None and raw.hex() in self.integrators.hexes()
        sig_ok = trusted and raw is not None and ed25519_ok(raw, sig, text.encode("utf-8"))
        if cp.get("store_id") != self.store_id or (cp.get("seq"), cp.get("hash")) != (seq, link):
            self.bad(line, seq, "checkpoint", "the integrator's checkpoint names another head")
        elif not sig_ok:
            self.bad(line, seq, "checkpoint", "the integrator checkpoint's signer is not trusted")
        elif (
            self.frontier is not None
            and self.frontier.size == seq
            and cp.get("root") != (base64.b64encode(self.frontier.root()).decode())
        ):
            self.bad(line, seq, "checkpoint", f"its root is not that of events 1..{seq}")

    def content_row(self, line: int, rec: dict[str, Any]) -> None:
        rid, kind, item = str(rec.get("request_id")), rec.get("kind"), rec.get("content")
        if kind in OUTCOMES:
            self.answered.add(rid)
        if kind == "request" and self.content and item is None:
            self.bad(line, rec.get("seq"), "content_missing", f"request {rid}: no content")
            return
        if item is None:
            return
        if kind != "request" or not self.content:
            self.bad(line, rec.get("seq"), "content_extra", f"request {rid}: content not declared")
        elif self.content_item(line, rec, item, rid):
            self.content_checked += 1

    def content_item(self, line: int, rec: dict[str, Any], item: Any, rid: str) -> bool:
        seq = rec.get("seq")
        evidence = item.get("evidence") if isinstance(item, dict) else None
        events = evidence.get("events") if isinstance(evidence, dict) else None
        carried = evidence.get("payloads") if isinstance(evidence, dict) else None
        if isinstance(item, dict) and "refused" in item:
            self.bad(line, seq, "content_refused", f"request {rid}: refused when exported")
            return False
        if not isinstance(events, list) or not events or not isinstance(carried, dict):
            self.bad(line, seq, "content_unverifiable", f"request {rid}: no evidence")
            return False
        before = len(self.defects)
        bodies = [
            (e, self.event(line, e, f"request {rid} evidence: ") if isinstance(e, dict) else {})
            for e in events
        ]
        if len(self.defects) != before or not all(b for _, b in bodies):
            return False
        ids = {e.get("request_id") for e, _ in bodies}
        if rid not in ids or not ids <= {rid, item.get("served_from")}:
            self.bad(line, seq, "content_mismatch", f"request {rid}: another request's content")
            return False
        named = {
            n: ref for _, b in bodies for n, ref in (b.get("payloads") or {}).items() if n in SHOWN
        }
        data: dict[str, bytes] = {}
        for name in sorted(set(named) | set(carried)):
            raw = payload_bytes(carried.get(name))
            if (
                name not in named
                or raw is None
                or not matches(name, raw, named[name], salt_of(carried.get(name)))
            ):
                kind = "content_" + ("extra" if name not in named else
                                     "missing" if raw is None else "mismatch")  # fmt: skip
                self.bad(line, seq, kind, f"request {rid}: payload {name} is not as signed")
                return False
            data[name] = raw
        if not any(e.get("kind") in OUTCOMES for e, _ in bodies):
            self.unanswered[rid] = (line, seq)
        intent: dict[str, Any] = next((e for e, _ in bodies if e.get("kind") == "request"), {})
        answer = next((parsed(data[n]) for n in SHOWN[1:] if n in data), None)
        expected = {
            **shown(parsed(data["request_body"]) if "request_body" in data else None, answer),
            "task": rec.get("task"),
            "caller": rec.get("caller"),
            "policy_fingerprint": intent.get("policy_fingerprint"),
        }
        wrong = [k for k, v in expected.items() if item.get(k) != v]
        if item.get("outcome") not in {e.get("kind") for e, _ in bodies}:
            wrong.append("outcome")
        if wrong:
            self.bad(line, seq, "content_mismatch", f"request {rid}: shown {', '.join(wrong)} "
                     "differ(s) from the signed record")  # fmt: skip
            return False
        return True

    def finish(self, line: int, head: Any) -> None:
        for rid, (at, seq) in self.unanswered.items():
            if rid in self.answered:
                self.content_checked -= 1
                self.bad(at, seq, "content_missing", f"request {rid}: its answer is left out")
        if not isinstance(head, dict):
            self.bad(0, None, "no_head", "no export_head record: the export may be cut short")
            return
        parsed = self.event(line, head, "export_head: ")
        seq, data = head.get("seq"), parsed.get("data") if isinstance(parsed, dict) else None
        if parsed and parsed.get("kind") != "export":
            self.bad(line, seq, "bad_head", "export_head is not an EXPORT event")
            return
        data = data if isinstance(data, dict) else {}
        upto, count, digest = data.get("upto_seq"), data.get("events"), data.get("rows_digest")
        if not isinstance(upto, int) or not isinstance(count, int) or not isinstance(digest, str):
            self.bad(line, seq, "bad_head", "the EXPORT event records no head, count or digest")
            return
        if count != self.count:
            self.bad(line, seq, "slice_mismatch", f"EXPORT counts {count}, file has {self.count}")
        elif "sha256:" + self.digest.hexdigest() != digest:
            self.bad(line, seq, "slice_mismatch", "the records' hashes are not the ones exported")
        if self.last is not None and self.last > upto:
            self.bad(line, seq, "slice_mismatch", f"seq {self.last} is after the head {upto}")
        if not self.filtered:
            if self.count and (self.first != 1 or self.gaps or self.last != upto):
                self.bad(line, seq, "gap", f"an unfiltered export must hold seq 1 to {upto}")
            if (
                seq == upto + 1
                and not self.sequenced(seq)
                and self.last == upto
                and head.get("prev_hash") != self.last_hash
            ):
                self.bad(line, seq, "broken_link", f"the EXPORT event does not link to seq {upto}")
        link = head.get("link")
        if self.sequenced(seq) and link is not None:
            prev = str(head.get("link_prev"))
            if not prev.isascii() or link != sha((prev + str(head.get("hash"))).encode()):
                self.bad(line, seq, "hash_mismatch", "export_head: link is not sha256(prev||hash)")


def payload_bytes(item: Any) -> bytes | None:
    if not isinstance(item, dict):
        return None
    try:
        text = item.get("text")
        if isinstance(text, str):
            return text.encode("utf-8")
        return base64.b64decode(str(item.get("base64")), validate=True)
    except (UnicodeEncodeError, ValueError, binascii.Error):
        return None


def salt_of(item: Any) -> bytes | None:
    """A sealed payload's salt, carried beside its content (16 bytes as hex)."""
    text = item.get("salt") if isinstance(item, dict) else None
    try:
        salt = bytes.fromhex(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return salt if salt is not None and len(salt) == 16 else None


def matches(name: str, raw: bytes, ref: str, salt: bytes | None = None) -> bool:
    """A payload's bytes hash to the signed digest; a request body with base64 attachments
    is stored with each canonical attachment replaced by a marker naming its digest. A
    sealed payload (a ``salt`` carried) is stored as SEAL_MARK + salt + those bytes."""

    def seal(stored: bytes) -> bytes:
        return SEAL_MARK + salt + stored if salt is not None else stored

    if sha(seal(raw)) == ref:
        return True
    if name != "request_body" or b'"base64"' not in raw or MARK in raw:
        return False
    try:
        body = json.loads(raw)
    except ValueError:
        return False
    stored = raw
    for text in inline_sources(body):
        try:
            decoded = base64.b64decode(str(text), validate=True)
        except (ValueError, binascii.Error):
            continue
        if base64.b64encode(decoded).decode() == text:
            marker = b'"' + MARK + sha(decoded).encode() + b'"'
            stored = stored.replace(b'"' + text.encode() + b'"', marker)
    return sha(seal(stored)) == ref


def inline_sources(body: Any) -> Iterator[Any]:
    """The ``data`` of each base64 image or document block, also inside a tool result."""
    for message in body.get("messages") or [] if isinstance(body, dict) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            inner = block.get("content") if isinstance(block, dict) else None
            tool_result = isinstance(block, dict) and block.get("type") == "tool_result"
            for b in [block, *(inner if tool_result and isinstance(inner, list) else [])]:
                source = b.get("source") if isinstance(b, dict) else None
                if not isinstance(source, dict) or source.get("type") != "base64":
                    continue
                if b.get("type") in ("image", "document"):
                    yield source.get("data")


def parsed(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")


def shown(sent: Any, answer: Any) -> dict[str, Any]:
    body = sent if isinstance(sent, dict) else {}
    blocks = answer.get("content") if isinstance(answer, dict) else None
    blocks = blocks if isinstance(blocks, list) else []
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    texts = [answer] if isinstance(answer, str) else texts
    model = answer.get("model") if isinstance(answer, dict) else None
    sent_model = body.get("model") if isinstance(body.get("model"), str) else None
    return {"model": model if isinstance(model, str) else sent_model, "system": body.get("system"),
            "messages": list(body.get("messages") or []), "answer_blocks": blocks,
            "answer": "".join(texts) if texts or answer is not None else None}  # fmt: skip


def verify_export(path: Path, keys: Keys, integrators: Keys) -> dict[str, Any]:
    records: list[tuple[int, Any]] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if raw.strip():
                try:
                    records.append((number, json.loads(raw)))
                except ValueError:
                    records.append((number, None))
    last: dict[str, Any] = records[-1][1] if records and isinstance(records[-1][1], dict) else {}
    head = last.get("export_head")
    try:
        data = json.loads(head.get("body", "{}") if isinstance(head, dict) else "{}")
    except ValueError:
        data = {}
    walk = Walk(data if isinstance(data, dict) else {}, keys, integrators)
    found, at = None, 0
    for number, rec in records:
        if not isinstance(rec, dict):
            walk.bad(number, None, "bad_record", "not a JSON object")
            continue
        if found is not None:
            walk.bad(number, None, "bad_record", "a record follows the export_head record")
        this = rec.pop("export_head", None)
        if rec:
            walk.row(number, rec)
        if this is not None:
            found, at = this, number
    walk.finish(at, found)
    return {"ok": not walk.defects, "events_checked": walk.count, "defects": walk.defects,
            "content_checked": walk.content_checked, "content": walk.content}  # fmt: skip


def verify_receipt(path: Path, keys: Keys, record: Keys) -> dict[str, Any]:
    receipt = json.loads(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    head = checkpoint_problem(receipt.get("checkpoint"), keys)
    if isinstance(head, str):
        problems.append(f"checkpoint: {head}")
    events = receipt.get("events") or []
    if not events:
        problems.append("the receipt proves no event")
    for e in events:
        seq, body = e.get("seq"), str(e.get("body")).encode("utf-8")
        fields = parsed(body) if isinstance(parsed(body), dict) else {}
        if sha(str(e.get("prev_hash")).encode() + body) != e.get("hash"):
            problems.append(f"seq {seq}: hash is not sha256(prev_hash || body)")
        elif [fields.get(k) for k in ("seq", "request_id", "kind")] != [
            seq, receipt.get("request_id"), e.get("kind")]:  # fmt: skip
            problems.append(f"seq {seq}: its body is not this request's event at this seq")
        if record.raw:
            store = head[0].removeprefix(ORIGIN) if not isinstance(head, str) else ""
            message = record_message(e.get("hash"), store, e.get("prev_hash") == "")
            if (why := record.check(e.get("key_id"), e.get("signature"), message)) is not None:
                problems.append(f"seq {seq}: record signature: {why}")
        if not isinstance(head, str):
            try:
                proof = [base64.b64decode(p, validate=True) for p in e["inclusion_proof"]]
                got = inclusion_root(leaf(str(e.get("hash"))), seq - 1, head[1], proof)
            except (ValueError, KeyError, TypeError, binascii.Error):
                got = None
            if got is None or base64.b64encode(got).decode() != head[2]:
                problems.append(f"seq {seq}: its inclusion proof does not lead to the signed root")
    return {"ok": not problems, "events_checked": len(events), "problems": problems}


def key_texts(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        path = Path(value)
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else [value]
        out += [t for line in lines if (t := line.split("#", 1)[0].strip())]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["export", "receipt", "checkpoint"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--keys", type=Path, help="the file `gateway keys public` writes")
    for kind in ("record", "checkpoint", "integrator"):
        parser.add_argument(f"--{kind}-key", action="append", default=[], metavar="KEY")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    try:
        given = json.loads(args.keys.read_text(encoding="utf-8")) if args.keys else {}
        keys = {k: Keys(list(given.get(k) or []) + key_texts(getattr(args, f"{k}_key")))
                for k in ("record", "checkpoint", "integrator")}  # fmt: skip
        cp_keys = Keys([*keys["checkpoint"].hexes(), *keys["integrator"].hexes()])
        if args.what == "export":
            report = verify_export(args.file, keys["record"], keys["integrator"])
        elif args.what == "receipt":
            report = verify_receipt(args.file, cp_keys, keys["record"])
        else:
            head = checkpoint_problem(json.loads(args.file.read_text(encoding="utf-8")), cp_keys)
            report = {"ok": not isinstance(head, str), "problems": [head] if isinstance(head, str)
                      else [], "tree_size": None if isinstance(head, str) else head[1]}  # fmt: skip
    except (OSError, ValueError, AttributeError) as exc:
        print(
            f"error: {exc} (checking {args.file}; the file or a key is unusable)", file=sys.stderr
        )
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        for line, seq, kind, detail in report.get("defects", []):
            print(f"  line {line} seq {seq if seq is not None else '-'}: {kind}: {detail}")
        for problem in report.get("problems", []):
            print(f"  {problem}")
        print(f"{'intact' if report['ok'] else 'DEFECTS'}: {args.what} {args.file.name}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
