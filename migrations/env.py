"""Alembic environment for the audit database.

    $ alembic upgrade head              # developers; URL from GATEWAY_DATABASE_URL
    $ gateway db upgrade                # operators; same migrations, packaged in the wheel

When ``audit.store.migrate`` runs the migrations it hands over an open connection in
``config.attributes["connection"]``; otherwise this file opens one from the URL.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from audit.store.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # Each migration commits on its own, so a failure leaves the database at the revision
        # before it. Alembic only does so on a connection not yet in a transaction: one handed
        # over inside a transaction runs every migration in that transaction (the caller's
        # choice; audit.store.migrate.create_schema makes a new database whole that way).
        transaction_per_migration=True,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = (
        config.get_main_option("sqlalchemy.url")
        or os.environ.get("GATEWAY_DATABASE_URL")
        or "sqlite:///gateway-audit.db"
    )
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported for the audit database")
run_migrations_online()
