"""A stateless proxy on `gateway serve`'s own stack: the floor issue 29's ratios are set against.

    $ .venv/bin/python bench/stateless_proxy.py --upstream http://127.0.0.1:PORT [--port N]

Issue 29 asks for "the served path at the cost of a stateless proxy". This is that proxy,
and nothing more: uvicorn with httptools and uvloop (as `gateway serve` runs), one Starlette
route that reads the request's bytes, posts them upstream through one pooled aiohttp session
(the client `gateway serve`'s upstream leg sends through) with the caller's API headers, and
gives back the upstream's status, content type and bytes; a stream is passed on chunk by
chunk as it arrives. No policy, no key check, no record, no log line, no JSON parsed: what any
Python proxy on these libraries pays for two HTTP legs, so the gateway's figures can be read
as what it adds over that, beside what it adds over a raw call.

Under ``/cached`` (a client's base URL ``{url}/cached``) it is also the floor of a cache hit:
a body seen before is answered from memory by its exact bytes, with nothing else done.

`bench/throughput_bench.py --proxy` and `bench/serve_ttft_bench.py --proxy` run it as one
more served kind in their shuffled rounds (the first also its cache hit beside the
gateway's replay hit). ``GET /readyz`` answers 200 once it serves.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# What the Messages API reads of a request's headers; the rest (host, content-length, the
# client's own identification) is the connection's, not the call's.
FORWARDED = ("x-api-key", "authorization", "anthropic-version", "anthropic-beta", "content-type")


def proxy_app(upstream: str) -> Starlette:
    session: aiohttp.ClientSession | None = None

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        nonlocal session
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))
        yield
        await session.close()

    async def messages(request: Request) -> Response:
        assert session is not None
        body = await request.body()
        headers = {k: v for k in FORWARDED if (v := request.headers.get(k)) is not None}
        answer = await session.post(f"{upstream}/v1/messages", data=body, headers=headers)
        kind = answer.headers.get("content-type", "application/json")
        if not kind.startswith("text/event-stream"):
            async with answer:
                return Response(await answer.read(), answer.status, media_type=kind)

        async def chunks() -> AsyncIterator[bytes]:
            async with answer:
                async for chunk in answer.content.iter_any():
                    yield chunk

        return StreamingResponse(chunks(), answer.status, media_type=kind)

    # The floor of a cache hit: a body seen before is answered from memory, by its exact bytes,
    # with what the upstream answered the first time (no key, record, parse or expiry).
    # Only a whole 200 answer is kept: a stream is passed on as it comes.
    remembered: dict[bytes, tuple[bytes, str | None]] = {}

    async def cached(request: Request) -> Response:
        body = await request.body()
        seen = remembered.get(body)
        if seen is None:
            answer = await messages(request)
            if answer.status_code == 200 and not isinstance(answer, StreamingResponse):
                remembered[body] = (answer.body, answer.media_type)
            return answer
        return Response(seen[0], media_type=seen[1])

    async def ready(_request: Request) -> Response:
        return Response(b"ok")

    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/cached/v1/messages", cached, methods=["POST"]),
            Route("/readyz", ready),
        ],
        lifespan=lifespan,
    )


@contextmanager
def stateless_proxy(upstream: str) -> Iterator[str]:
    """The proxy in its own process, in front of ``upstream``: its URL (pid in SERVER_PIDS)."""
    from bench.server_bench import free_port, served_process

    port = free_port()
    command = [sys.executable, __file__, "--upstream", upstream, "--port", str(port)]
    with served_process(command, port, "the stateless proxy") as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="the fake's base URL")
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()
    uvicorn.run(
        proxy_app(options.upstream.rstrip("/")),
        host="127.0.0.1",
        port=options.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        server_header=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
