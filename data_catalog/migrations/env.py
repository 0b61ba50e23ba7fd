"""Alembic environment: runs on the connection the catalog hands over."""

from alembic import context

from data_catalog.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
