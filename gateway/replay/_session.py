"""The replay facade: one replay run opened from Settings, for any front end.

    with ReplaySession.open(settings) as session:
        prepared = session.prepare(Selection(task="compliance_review"), live=True)
        report = session.run(prepared, progress=lambda row: ...)

The session opens the audit store and the provider registry the gateway itself would use
(same retry schedule, same wire capture) and closes both. Every error is a GatewayError: an
audit-store failure is translated by the recorder, never passed through.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from gateway._inputs import EXPERIMENT_CALLER, check_name
from gateway._store_adapter import audit_call
from gateway.catalog import Catalog
from gateway.errors import InputError
from gateway.providers.registry import Providers
from gateway.replay._model import ReplayReport
from gateway.replay._recorded import Selection
from gateway.replay._runner import PreparedRun, Progress, Replayer
from gateway.request import Recorder
from gateway.settings import Settings


class ReplaySession:
    def __init__(
        self,
        recorder: Recorder,
        catalog: Catalog,
        providers: Providers,
        *,
        operator: str | None = None,
    ) -> None:
        self._recorder = recorder
        self._providers = providers
        self.replayer = Replayer(
            recorder.store, catalog, providers, operator=operator, recorder=recorder
        )

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        providers: Providers | None = None,
        operator: str | None = None,
    ) -> ReplaySession:
        """``operator``: who runs the replay, recorded as its events' caller."""
        operator = check_name(operator, "operator", example="j.smith")
        if operator == EXPERIMENT_CALLER:  # its events would be left out with the samples
            raise InputError(
                f"{EXPERIMENT_CALLER!r} is reserved for experiment samples, not an operator.",
                hint="Name who runs the replay, such as 'j.smith'.",
            )
        catalog = Catalog.load(settings.catalog_override)
        recorder = Recorder.open(settings, create=False)
        return cls(recorder, catalog, providers or Providers(settings), operator=operator)

    def prepare(
        self,
        selection: Selection,
        *,
        live: bool = False,
        model: str | None = None,
        policies: Path | None = None,
    ) -> PreparedRun:
        """Validate the whole run; raises before anything is recorded. ``policies``: a
        candidate policy folder to replay under."""
        return audit_call(
            self.replayer.prepare, selection, live=live, model=model, policies=policies
        )

    def run(
        self, prepared: PreparedRun, progress: Progress | None = None, *, keep_rows: bool = True
    ) -> ReplayReport:
        """``keep_rows=False``: the rows reach ``progress`` only (flat memory)."""
        return audit_call(self.replayer.run, prepared, progress, keep_rows=keep_rows)

    def close(self) -> None:
        try:
            self._providers.close()
        finally:
            self._recorder.store.close()

    def __enter__(self) -> ReplaySession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
