"""A gateway process sending a task's requests over a cloud transport, to be killed mid-call.

    $ .venv/bin/python tests/gateway/cloud_child.py '{"settings": {...}, "task": "t",
        "prompts": ["a", "b"], "vertex_token": "ya29..."}'

One JSON line on stdout per request that returned (``ack``: request_id, cached), flushed at
once, so the test knows what was acknowledged before it sends SIGKILL. A Vertex provider gets
the static test token (Google's standard chain would look for real credentials).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateway import Gateway, Settings
from gateway.providers.vertex import VertexProvider


def main(command: dict[str, Any]) -> None:
    token = command.get("vertex_token")

    def vertex(settings: Settings) -> VertexProvider:
        assert settings.vertex_project and settings.vertex_region
        return VertexProvider(
            project=settings.vertex_project,
            region=settings.vertex_region,
            access_token=token,
            base_url=settings.vertex_base_url,
        )

    providers: Any = {"vertex": vertex} if token else None
    with Gateway(Settings(**command["settings"]), providers=providers) as gw:
        for prompt in command["prompts"]:
            result = gw.complete(command["task"], prompt)
            line = {"event": "ack", "request_id": result.request_id, "cached": result.cached}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
