"""Helpers shared by the replay tests: open the recorded store, write catalog overrides."""

from __future__ import annotations

from pathlib import Path

from audit import AuditStore, EventKind, StoredEvent
from gateway.catalog import Catalog
from gateway.keys import cache_key
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.registry import Providers
from gateway.replay import Replayer, ReplayReport, Selection
from gateway.request import Recorder
from gateway.settings import Settings

API_KEY = "sk-ant-test-replay-KEY-DO-NOT-LEAK"

RETIRED_OPUS_4_6 = """
schema = 1
[models."claude-opus-4-6"]
provider = "anthropic"
pinned = true
api_version = "2023-06-01"
sampling = "temperature-or-top-p"
top_k = true
thinking_types = ["enabled", "adaptive", "disabled"]
effort_levels = ["low", "medium", "high", "max"]
structured_outputs = true
max_output_tokens = 128000
context_window = 1000000
lifecycle = "retired"
retires_at = 2026-01-15
"""

SONNET_4_6_NEW_API = """
schema = 1
[models."claude-sonnet-4-6"]
provider = "anthropic"
pinned = true
api_version = "2099-01-01"
sampling = "temperature-or-top-p"
top_k = true
thinking_types = ["enabled", "adaptive", "disabled"]
effort_levels = ["low", "medium", "high", "max"]
structured_outputs = true
max_output_tokens = 128000
context_window = 1000000
lifecycle = "active"
"""


def override(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalog.override.toml"
    path.write_text(text, encoding="utf-8")
    return path


def replay(
    url: str,
    *ids: str,
    base_url: str | None = None,
    catalog: Catalog | None = None,
    live: bool = False,
    model: str | None = None,
    task: str | None = None,
) -> ReplayReport:
    providers = Providers(
        Settings(),
        overrides={
            "anthropic": lambda _s: AnthropicProvider(
                api_key=API_KEY, base_url=base_url, max_attempts=1
            )
        },
    )
    key = cache_key(Settings(database_url=url), create=False)  # the deployment's, beside it
    with AuditStore.open(url, "os") as store:
        recorder = Recorder(store, cache_key=key)
        replayer = Replayer(store, catalog or Catalog.load(), providers, recorder=recorder)
        report = replayer.run(
            replayer.prepare(Selection(request_ids=ids, task=task), live=live, model=model)
        )
    providers.close()
    return report


def replay_events(url: str, phase: str | None = "outcome") -> list[StoredEvent]:
    """REPLAY events: by default the outcome of each replayed request (one per row)."""
    with AuditStore.open(url, "os") as store:
        events = list(store.iter_events(kind=EventKind.REPLAY))
    return [e for e in events if phase is None or e.data.get("phase") == phase]


def head(url: str) -> int:
    with AuditStore.open(url, "os") as store:
        return store.head()[0]
