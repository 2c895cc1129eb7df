"""Images and PDF documents: only what the policy opens, within its limits, checked locally."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.errors import InputError, PolicyViolation
from gateway.policy import Policy, plan_request
from tests.tools.conftest import MakePolicy, model_of

PDF = b"%PDF-1.7\n1 0 obj << >> endobj\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
INPUTS = """
[input]
images = { max_bytes = 1_000, max_count = 2 }
documents = { max_bytes = 10_000_000, max_count = 1 }
"""


def _image(data: bytes = PNG, media_type: str = "image/png") -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": encoded},
    }


def _document(data: bytes = PDF) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    source = {"type": "base64", "media_type": "application/pdf", "data": encoded}
    return {"type": "document", "source": source, "title": "Prospectus"}


def _ask(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*blocks, {"type": "text", "text": "Summarise."}]}]


def _plan(catalog: Catalog, policy: Policy, messages: list[dict[str, Any]]) -> Any:
    return plan_request(policy, model_of(catalog, policy), messages)


def test_allowed_attachments_are_sent_as_given(make_policy: MakePolicy, catalog: Catalog) -> None:
    policy = make_policy(INPUTS)
    messages = _ask(_image(), _document())
    assert _plan(catalog, policy, messages).body["messages"] == messages


@pytest.mark.parametrize(
    ("blocks", "key"),
    [
        ((_image(),), "input.images"),
        ((_document(),), "input.documents"),
    ],
)
def test_attachments_a_policy_does_not_open_are_violations(
    make_policy: MakePolicy, catalog: Catalog, blocks: tuple[dict[str, Any], ...], key: str
) -> None:
    with pytest.raises(PolicyViolation) as caught:
        _plan(catalog, make_policy(), _ask(*blocks))
    assert caught.value.key == key


def test_an_oversized_image_is_refused_before_it_is_sent(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    with pytest.raises(PolicyViolation, match="larger than the 1,000 bytes") as caught:
        _plan(catalog, make_policy(INPUTS), _ask(_image(b"x" * 1001)))
    assert caught.value.key == "input.images.max_bytes"


def test_a_20_mb_pdf_is_refused_locally(make_policy: MakePolicy, catalog: Catalog) -> None:
    big = _document(PDF + b"0" * (20 * 1024 * 1024))
    with pytest.raises(PolicyViolation, match=r"20\.0 MiB") as caught:
        _plan(catalog, make_policy(INPUTS), _ask(big))
    assert caught.value.key == "input.documents.max_bytes"


def test_too_many_attachments_are_refused(make_policy: MakePolicy, catalog: Catalog) -> None:
    with pytest.raises(PolicyViolation) as caught:
        _plan(catalog, make_policy(INPUTS), _ask(_image(), _image(), _image()))
    assert caught.value.key == "input.images.max_count"


def test_url_sources_are_refused_unless_allowed(make_policy: MakePolicy, catalog: Catalog) -> None:
    by_url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with pytest.raises(PolicyViolation, match="request time") as caught:
        _plan(catalog, make_policy(INPUTS), _ask(by_url))
    assert caught.value.key == "input.images.url"
    allowed = make_policy("\n[input]\nimages = { max_bytes = 1_000, max_count = 1, url = true }\n")
    assert _plan(catalog, allowed, _ask(by_url)).body["messages"][0]["content"][0] == by_url


def test_file_sources_are_refused(make_policy: MakePolicy, catalog: Catalog) -> None:
    by_file = {"type": "document", "source": {"type": "file", "file_id": "file_1"}}
    with pytest.raises(PolicyViolation) as caught:
        _plan(catalog, make_policy(INPUTS), _ask(by_file))
    assert caught.value.key == "input.documents"


@pytest.mark.parametrize(
    ("block", "says"),
    [
        (_document(b"not a pdf"), "not a PDF"),
        (_image(media_type="image/tiff"), "media type"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png"}}, "base64"),
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "@@"},
            },
            "not valid base64",
        ),
        ({**_image(), "extra": 1}, "unknown keys"),
    ],
)
def test_malformed_attachments_are_input_errors(
    make_policy: MakePolicy, catalog: Catalog, block: dict[str, Any], says: str
) -> None:
    with pytest.raises(InputError, match=says):
        _plan(catalog, make_policy(INPUTS), _ask(block))


def test_an_image_from_the_assistant_is_refused(make_policy: MakePolicy, catalog: Catalog) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [_image()]},
    ]
    with pytest.raises(InputError, match="assistant turn"):
        _plan(catalog, make_policy(INPUTS), messages)


def test_limits_are_part_of_the_fingerprint(make_policy: MakePolicy) -> None:
    assert make_policy(INPUTS).fingerprint != make_policy().fingerprint
    looser = INPUTS.replace("max_count = 2", "max_count = 3")
    assert make_policy(INPUTS).fingerprint != make_policy(looser).fingerprint
