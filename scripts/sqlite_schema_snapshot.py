"""Write audit/store/_sqlite_snapshot.py from the migrations: run it after adding one.

    .venv/bin/python scripts/sqlite_schema_snapshot.py

A new SQLite audit file is created from that snapshot, not by Alembic (a CLI command then
starts without importing Alembic); tests/audit/test_sqlite_snapshot.py fails until the
snapshot matches the migrations again.
"""

from __future__ import annotations

from pathlib import Path

from audit.store.migrate import sqlite_snapshot_source

TARGET = Path(__file__).resolve().parents[1] / "audit" / "store" / "_sqlite_snapshot.py"

if __name__ == "__main__":
    TARGET.write_text(sqlite_snapshot_source(), encoding="utf-8")
    print(f"wrote {TARGET}")
