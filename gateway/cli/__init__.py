"""The ``gateway`` command line: one click group per module, one error boundary here.

    $ gateway policy review policies/
    $ gateway audit verify

Exit codes (one table, ``ExitCode`` in ``_boundary.py``): 0 success; 1 a check found problems
(review errors, verify defects, replay failures); 2 bad input or usage (unknown task, forbidden
override, unreadable file, bad URL); 3 the model provider failed; 4 the audit database is
unavailable or a write failed; 70 a bug; 130 interrupted; 141 stdout was closed (``| head``).

The Settings are read from the environment once per invocation, on first use
(``settings_of(ctx)`` in ``_context.py``).
"""

from gateway.cli._main import main

__all__ = ["main"]
