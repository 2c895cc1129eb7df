"""langchain-anthropic against the gateway, one scenario per run (run in the client's venv).

    python langchain_calls.py system|structured_tool|structured_json_schema|stream [...]

Env: GATEWAY_URL, GATEWAY_KEY, MODEL (the model id the application asks for). Prints one JSON
line per scenario, in order: {"value": ...} or {"error": {"status": ..., "message": ...}}.
"""

import json
import os
import sys

import anthropic
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


def chat() -> ChatAnthropic:
    # The application's own settings; only the address and the key point at the gateway.
    return ChatAnthropic(
        model=os.environ["MODEL"],
        base_url=os.environ["GATEWAY_URL"],
        api_key=os.environ["GATEWAY_KEY"],
        max_retries=0,
    )


def run(scenario: str) -> object:
    question = [SystemMessage("You are a helpful assistant. Be brief."), HumanMessage("Hello")]
    if scenario == "system":
        return chat().invoke(question).content
    if scenario == "structured_tool":
        person = chat().with_structured_output(Person).invoke("Ada Lovelace is 36.")
        return person.model_dump()
    if scenario == "structured_json_schema":
        structured = chat().with_structured_output(Person, method="json_schema")
        return structured.invoke("Ada Lovelace is 36.").model_dump()
    if scenario == "stream":
        return [chunk.content for chunk in chat().stream(question)]
    raise SystemExit(f"unknown scenario {scenario}")


for name in sys.argv[1:]:
    try:
        print(json.dumps({"value": run(name)}))
    except anthropic.APIStatusError as exc:
        print(json.dumps({"error": {"status": exc.status_code, "message": str(exc.message)}}))
