"""pydantic-ai with its default settings against the gateway, one scenario per run.

    python pydantic_ai_calls.py instructions|output_type|tool [...]

Env: GATEWAY_URL, GATEWAY_KEY, MODEL. Prints one JSON line per scenario: {"value": ...} or
{"error": {"status": ..., "message": ...}}.
"""

import json
import os
import sys

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider


class Person(BaseModel):
    name: str
    age: int


def model() -> AnthropicModel:
    # Only the address and the key point at the gateway; every setting is pydantic-ai's default.
    provider = AnthropicProvider(
        base_url=os.environ["GATEWAY_URL"], api_key=os.environ["GATEWAY_KEY"]
    )
    return AnthropicModel(os.environ["MODEL"], provider=provider)


def run(scenario: str) -> object:
    if scenario == "instructions":
        agent = Agent(model(), instructions="You are a helpful assistant. Be brief.")
        return agent.run_sync("Hello").output
    if scenario == "output_type":
        extractor = Agent(model(), instructions="Extract the person.", output_type=Person)
        return extractor.run_sync("Ada Lovelace is 36.").output.model_dump()
    if scenario == "tool":
        agent = Agent(model(), instructions="Answer with the weather tool.")

        @agent.tool_plain
        def weather(city: str) -> str:
            """Today's weather in a city."""
            return f"sunny in {city}"

        result = agent.run_sync("What is the weather in Paris?")
        return {"output": result.output, "requests": len(result.all_messages())}
    raise SystemExit(f"unknown scenario {scenario}")


for name in sys.argv[1:]:
    try:
        print(json.dumps({"value": run(name)}))
    except ModelHTTPError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        message = (body.get("error") or {}).get("message") or str(exc)
        print(json.dumps({"error": {"status": exc.status_code, "message": message}}))
