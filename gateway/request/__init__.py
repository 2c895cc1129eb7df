"""The request path: one request from a front end's call to its recorded outcome.

    with Gateway(settings) as gw:                  # or AsyncGateway, the same stages
        result = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")

``Gateway``/``AsyncGateway`` drive a ``Request`` through the ``RequestPipeline`` (resolve,
plan, key), the ``ReplayCache``'s one serving rule, and the ``Recorder``, which writes every
event of the call (intent, attempts, one terminal outcome). Replay and the CLI reuse the
recorder and the pipeline; nothing else writes a request's events.
"""

from gateway.request._call_types import CallLabels, Failed, Intended, Intent, Replied, Sent
from gateway.request._client import AsyncGateway, Gateway
from gateway.request._offline import offline_policy
from gateway.request._pipeline import RequestPipeline
from gateway.request._prepared import Request
from gateway.request._record_facts import OVERRIDES_PAYLOAD
from gateway.request._recorded_streams import arecord_stream, record_stream
from gateway.request._recording import Recorder
from gateway.request._replayable import outside_world
from gateway.request._served import Answered, Served, ServedMemo
from gateway.request._streams import AsyncStream, Stream
from gateway.request._threads import AuditThreads

__all__ = [
    "OVERRIDES_PAYLOAD",
    "Answered",
    "AsyncGateway",
    "AsyncStream",
    "AuditThreads",
    "CallLabels",
    "Failed",
    "Gateway",
    "Intended",
    "Intent",
    "Recorder",
    "Replied",
    "Request",
    "RequestPipeline",
    "Sent",
    "Served",
    "ServedMemo",
    "Stream",
    "arecord_stream",
    "offline_policy",
    "outside_world",
    "record_stream",
]
