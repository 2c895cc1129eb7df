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
from tests.fakes.cloud_auth import vertex_with_token


def main(command: dict[str, Any]) -> None:
    token = command.get("vertex_token")
    providers: Any = {"vertex": vertex_with_token(token)} if token else None
    with Gateway(Settings(**command["settings"]), providers=providers) as gw:
        for prompt in command["prompts"]:
            result = gw.complete(command["task"], prompt)
            line = {"event": "ack", "request_id": result.request_id, "cached": result.cached}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
