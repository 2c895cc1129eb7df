"""Compare a live replay's answer with the recorded one: outcome, similarity, text diff,
JSON field changes, and both answers side by side (gateway.replay._answers).

    fields = compare_answers(store, catalog, recorded, sent, asked="claude-opus-4-6")
    fields["outcome"], fields["similarity"], fields["replayed_answer"].cost_text

The result is the keyword arguments of a ``RequestReplay`` row.
"""

from __future__ import annotations

from typing import Any

from audit import AuditStore
from audit.verify.authenticity import SignatureCheck, check_outcome
from gateway._output_check import check_json_output, response_text
from gateway.catalog import Catalog
from gateway.policy import Policy
from gateway.replay._answers import answer_side
from gateway.replay._diff import compare_text, json_changes
from gateway.replay._model import Outcome
from gateway.replay._recorded import Recorded, response_json
from gateway.replay._verdicts import verdict_key, verdict_of
from gateway.request import Failed, Sent


def compare_answers(
    store: AuditStore,
    catalog: Catalog,
    recorded: Recorded,
    sent: Sent,
    asked: str | None,
    signature: SignatureCheck | None = None,
    *,
    policy: Policy | None = None,
) -> dict[str, Any]:
    """``asked``: the model the replay sent to (priced as the one that answered unless
    the answer names another). ``signature``: the read path's record-signature check; the
    recorded answer is shown only once its record checks out, as everywhere it is shown.
    ``policy``: the one the new answer was asked under (a migration's or a candidate's),
    whose schema and verdict it is checked by; the recorded policy by default."""
    replayed_policy = policy if policy is not None else recorded.policy
    if isinstance(sent, Failed):
        return {"outcome": Outcome.FAILED, "reason": str(sent.error or "no answer")}
    new_text = response_text(sent.reply.response)
    replayed = answer_side(
        new_text,
        sent.reply.response,
        catalog,
        asked_model=asked,
        latency_ms=sent.reply.latency_ms,
    )
    if recorded.response is not None:
        problems = check_outcome(store, recorded.response, signature=signature)
        if problems:
            return {
                "outcome": Outcome.FAILED,
                "reason": f"the recorded answer did not check out ({problems[0]}); not shown.",
                "replayed_answer": replayed,
            }
    old = response_json(store, recorded)
    if old is None:
        compared = compare_text("", new_text)
        return {
            "outcome": Outcome.DIFFERING,
            "reason": "no recorded response to compare with (the original call failed).",
            "text_diff": compared.diff,
            "replayed_answer": replayed,
        }
    old_text = response_text(old)
    compared = compare_text(old_text, new_text)
    verdicts = {
        "recorded_verdict": verdict_of(verdict_key(recorded.policy), old_text),
        "replayed_verdict": verdict_of(verdict_key(replayed_policy), new_text),
    }
    outcome = recorded.response.data if recorded.response is not None else {}
    result: dict[str, Any] = {
        "outcome": Outcome.IDENTICAL if compared.identical else Outcome.DIFFERING,
        "similarity": compared.similarity,
        "text_diff": compared.diff,
        # Latency and usage as the RESPONSE event recorded them at the time.
        "recorded_answer": answer_side(
            old_text,
            {"model": outcome.get("model") or old.get("model"), "usage": outcome.get("usage")},
            catalog,
            asked_model=recorded.model_id,
            latency_ms=outcome.get("latency_ms"),
        ),
        "replayed_answer": replayed,
        **verdicts,
    }
    failed_check = _production_check(replayed_policy, new_text)
    if failed_check is not None:
        result["outcome"], result["reason"] = Outcome.INVALID, failed_check
    old_verdict, new_verdict = verdicts["recorded_verdict"], verdicts["replayed_verdict"]
    if old_verdict is not None and new_verdict is not None and old_verdict != new_verdict:
        # The decision changed: whatever the wording shares, a flip is never "more similar"
        # than a rewording that kept the verdict, so it scores 0 (the text ratio is said).
        result["similarity"] = 0.0
        result.setdefault(
            "reason",
            f"verdict flipped: {old_verdict} -> {new_verdict} (the texts' character "
            f"similarity is {compared.similarity:.2f}).",
        )
    json_task = replayed_policy is not None and replayed_policy.output.format == "json"
    if json_task and not compared.identical:
        before = check_json_output(old_text, None)
        after = check_json_output(new_text, None)
        if before.ok and after.ok:
            result["json_changes"] = json_changes(before.value, after.value)
        else:
            side = "recorded" if not before.ok else "replayed"
            result["reason"] = f"the {side} answer is not valid JSON; compared as text."
    return result


def _production_check(policy: Policy | None, text: str) -> str | None:
    """Why the replayed answer would fail the check production runs on the task's answers
    (JSON that parses and matches the policy's schema), None when it would pass."""
    if policy is None or policy.output.format != "json":
        return None
    check = check_json_output(text, policy.output.json_schema)
    if check.ok:
        return None
    return f"the replayed answer fails the task's output check: {check.problem}."
