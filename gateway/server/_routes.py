"""The endpoints, as plain functions of a request: parse, call the gateway, render.

    POST /v1/messages               a message (plain or ``stream: true``), through the policy
    POST /v1/messages/count_tokens  an estimate of the input tokens the policy would send
    GET  /v1/models[/{id}]          the tasks callers may ask for, in the API's list shape
    GET  /healthz                   the process is up
    GET  /readyz                    the audit store is reachable and writable, policies loaded

Everything under ``/v1`` needs a caller key. Errors are raised, not rendered here: the app's
exception handlers answer them (``_errors.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway._log import log
from gateway.callers import CallerKey
from gateway.errors import GatewayError, UnknownTask
from gateway.policy import plan_request
from gateway.result import Result
from gateway.server._body import read_json
from gateway.server._errors import ApiError, answer_for
from gateway.server._lifecycle import ServerState
from gateway.server._models import listed_models
from gateway.server._routing import TASK_HEADER, ChosenTask, choose_task, unrouted
from gateway.server._sse import SSE_HEADERS, EventStreamResponse, error_frame, frame
from gateway.server._wire import (
    CAPPED_HEADER,
    MessagesCall,
    capped_header,
    message_body,
    parse_count_tokens,
    parse_messages,
    result_headers,
)

__all__ = ["count_tokens", "healthz", "messages", "model", "models", "readyz"]

BYTES_PER_TOKEN = 4  # count_tokens is an estimate, the same one the gateway sizes input by


def state_of(request: Request) -> ServerState:
    state: ServerState = request.state.server
    return state


async def _caller(request: Request, state: ServerState) -> CallerKey:
    key = await state.auth.caller_of(request.headers)
    if state.settings.server_tls_client_caller:
        tls = request.scope.get("extensions", {}).get("tls", {})
        if tls.get("client_cert_name") != key.caller:
            log.warning("caller_key_cert_mismatch", key_id=key.key_id)
            raise ApiError(
                401,
                "authentication_error",
                "the caller key does not belong to the client certificate: the server "
                "requires the certificate's common name to be the key's caller.",
            )
    request.state.caller = key.caller
    request.state.key_id = key.key_id
    return key


def note_answer(request: Request, result: Result) -> None:
    """What the access log and a span say of an answer: ids and numbers, never its text."""
    state = request.state
    state.request_id = result.request_id
    state.seq = result.seq
    state.cached = result.cached
    state.response_model = result.model
    state.stop_reason = result.stop_reason
    state.usage = result.usage


async def messages(request: Request) -> Response:
    state = state_of(request)
    key = await _caller(request, state)
    body = await read_json(request, state.settings.server_max_body_bytes)
    chosen = choose_task(
        body, header_task=request.headers.get(TASK_HEADER), key=key, policies=state.policies
    )
    call = parse_messages(
        body,
        header_task=chosen.task,
        policies=state.policies,
        betas=request.headers.get("anthropic-beta"),
    )
    if preferred := chosen.overrides(state.policies):
        call = replace(call, overrides={**call.overrides, **preferred})
    request.state.task = call.task
    try:
        if call.stream:
            return await _stream(request, state, key, call)
        return await _complete(request, state, key, call)
    except UnknownTask as exc:
        if chosen.unmatched:
            raise unrouted(exc, chosen, key, state.policies) from None
        raise


# The data subject a request is about (a DSAR's identifier): recorded as a keyed digest only,
# so that `gateway audit erase --subject` finds every request about it.
SUBJECT_HEADER = "x-gateway-subject"


async def _complete(
    request: Request, state: ServerState, key: CallerKey, call: MessagesCall
) -> Response:
    told: list[str] = []
    try:
        # Past the time-out the call is cancelled, and the gateway records it CANCELLED.
        with state.tracking():
            async with asyncio.timeout(state.settings.server_request_timeout_s):
                result = await state.gateway.complete(
                    call.task,
                    messages=call.messages,
                    caller=key.caller,
                    overrides=call.overrides or None,
                    on_request_id=told.append,
                    subject=request.headers.get(SUBJECT_HEADER),
                )
    except TimeoutError:
        raise _timed_out(state, told) from None
    except asyncio.CancelledError:
        if told:  # the shutdown's answer names the CANCELLED record (gateway.server._drain)
            request.state.request_id = told[0]
        raise
    note_answer(request, result)
    headers = result_headers(result, seq=state.settings.server_seq_header)
    return JSONResponse(message_body(result), headers=headers)


def _timed_out(state: ServerState, told: list[str]) -> ApiError:
    """The 504 of a call cancelled at the time-out, naming its CANCELLED record (none when
    it was cancelled before it was planned)."""
    return ApiError(
        504,
        "timeout_error",
        f"the request took longer than {state.settings.server_request_timeout_s:g} s; "
        "it was cancelled, and recorded so.",
        retry=True,
        request_id=told[0] if told else None,
    )


async def _stream(
    request: Request, state: ServerState, key: CallerKey, call: MessagesCall
) -> Response:
    deadline = asyncio.get_running_loop().time() + state.settings.server_request_timeout_s
    told: list[str] = []
    opened = state.gateway.stream(
        call.task,
        messages=call.messages,
        caller=key.caller,
        overrides=call.overrides or None,
        on_request_id=told.append,
        subject=request.headers.get(SUBJECT_HEADER),
    )
    # Counted in flight from before its intent until its outcome is recorded (in `finish`,
    # after the response ended), so a shutdown does not close the gateway under it.
    task = asyncio.current_task()
    assert task is not None
    state.track(task)
    try:
        try:
            async with asyncio.timeout_at(deadline):
                stream = await opened.__aenter__()
        except TimeoutError:
            raise _timed_out(state, told) from None
        request.state.request_id = stream.request_id
        events = aiter(stream)
        try:
            # The first event is awaited before the status is sent: a failure before anything
            # streamed is still an HTTP error the SDKs raise as their typed exception.
            async with asyncio.timeout_at(deadline):
                first = await anext(events, None)
        except BaseException as exc:
            await opened.__aexit__(type(exc), exc, exc.__traceback__)
            if isinstance(exc, TimeoutError):
                raise _timed_out(state, told) from None
            raise
    except BaseException:
        state.untrack(task)
        raise

    closed = False

    async def finish(exc_info: tuple[Any, Any, Any]) -> None:
        """Close the gateway's stream once (it records the outcome), then stop counting it."""
        nonlocal closed
        if closed:
            return
        closed = True
        try:
            with anyio.CancelScope(shield=True):
                try:
                    await opened.__aexit__(*exc_info)
                except Exception as exc:  # noqa: BLE001 - the outcome is already the gateway's
                    request.state.stream_close_error = type(exc).__name__
            with contextlib.suppress(RuntimeError):  # failed or left early: no result
                note_answer(request, stream.result)
        finally:
            state.untrack(task)

    async def body() -> AsyncIterator[bytes]:
        exc_info: tuple[Any, Any, Any] = (None, None, None)
        answered = False  # message_stop went out: the client has the whole answer
        try:
            if first is not None:
                yield frame(_with_gateway_id(first, stream.request_id))
            async with asyncio.timeout_at(deadline):
                async for event in events:
                    yield frame(event)
                    answered = event.get("type") == "message_stop"
        except GatewayError as exc:  # recorded by the gateway (FAILED); told in the stream
            answer = answer_for(exc)
            request.state.error_type = answer.error_type
            request.state.gateway_error = type(exc).__name__
            yield error_frame(replace(answer, request_id=stream.request_id))
        except TimeoutError:  # the gateway records CANCELLED as the stream is closed
            exc_info = sys.exc_info()
            if answered:
                # Only the recording of the outcome was left: an error after the whole
                # answer would contradict it, and SDKs would raise it and send it again.
                return
            late = ApiError(
                504, "timeout_error", "the stream took too long.", request_id=stream.request_id
            )
            request.state.error_type = late.error_type
            yield error_frame(late.answer())
        except BaseException:  # a client gone (cancelled): the gateway records CANCELLED
            exc_info = sys.exc_info()
            raise
        finally:
            await finish(exc_info)

    async def never_started() -> None:
        # The response ended before its body's first step (cancelled at once): the stream
        # was left, as by a client gone.
        await finish((asyncio.CancelledError, asyncio.CancelledError(), None))

    headers = {"request-id": stream.request_id, **SSE_HEADERS}
    if stream.capped:
        headers[CAPPED_HEADER] = capped_header(stream.capped)
    return EventStreamResponse(
        body(), closing=never_started, media_type="text/event-stream", headers=headers
    )


def _with_gateway_id(event: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The message's ``id`` is the gateway's request id, streamed as in a plain answer, so
    the SDK's final message names the audit record (the upstream's id is in the record)."""
    message = event.get("message")
    if event.get("type") != "message_start" or not isinstance(message, dict):
        return event
    return {**event, "message": {**message, "id": request_id}}


async def count_tokens(request: Request) -> Response:
    state = state_of(request)
    key = await _caller(request, state)
    body = await read_json(request, state.settings.server_max_body_bytes)
    chosen = choose_task(
        body, header_task=request.headers.get(TASK_HEADER), key=key, policies=state.policies
    )
    counted = parse_count_tokens(body, header_task=chosen.task, policies=state.policies)
    task = counted.task
    request.state.task = task
    try:
        policy = state.policies.get(task)
    except UnknownTask as exc:
        if chosen.unmatched:
            raise unrouted(exc, chosen, key, state.policies) from None
        raise
    model_info = state.catalog.get(chosen.overrides(state.policies).get("model", policy.model.id))
    if model_info is None:
        raise UnknownTask(task, [p.task for p in state.policies.policies()])
    # The caller's own parts count as they would be sent: within the policy's contract, or
    # refused naming its key (nothing is recorded: nothing is sent).
    plan = plan_request(policy, model_info, counted.messages, overrides=counted.overrides)
    return JSONResponse(
        {"input_tokens": _estimate(plan.body)}, headers={"x-gateway-estimate": "bytes/4"}
    )


def _estimate(body: dict[str, Any]) -> int:
    # Every part the model reads, whatever its block types (text, tool calls and results,
    # cached system blocks, attachments): the bytes of its JSON form, a deliberate overcount.
    read = {key: body[key] for key in ("system", "tools", "messages") if key in body}
    return max(1, math.ceil(len(json.dumps(read, ensure_ascii=False).encode()) / BYTES_PER_TOKEN))


async def models(request: Request) -> Response:
    state = state_of(request)
    key = await _caller(request, state)
    entries = _listed(state, key)
    ids = list(entries)
    query = request.query_params
    try:
        limit = min(max(int(query.get("limit", "20")), 1), 1000)
    except ValueError:
        raise ApiError(400, "invalid_request_error", "'limit' must be a number.") from None
    if (after := query.get("after_id")) is not None:
        ids = [i for i in ids if i > after]
    if (before := query.get("before_id")) is not None:
        kept = [i for i in ids if i < before]
        ids, has_more = kept[-limit:], len(kept) > limit
    else:
        ids, has_more = ids[:limit], len(ids) > limit
    return JSONResponse(
        {
            "data": [entries[i] for i in ids],
            "has_more": has_more,
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
        }
    )


async def model(request: Request) -> Response:
    state = state_of(request)
    key = await _caller(request, state)
    wanted = request.path_params["model_id"]
    entry = _listed(state, key).get(wanted)
    if entry is None:
        raise unrouted(UnknownTask(wanted, []), ChosenTask(wanted), key, state.policies)
    return JSONResponse(entry)


def _listed(state: ServerState, key: CallerKey) -> dict[str, dict[str, Any]]:
    created = state.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return listed_models(state.policies, state.catalog, key, created)


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    problems = await state_of(request).ready()
    if problems:
        return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
    return JSONResponse({"status": "ready"})
