"""asyncio API: units of work and every ``SessionDB`` method as coroutines.

Lock waits, flushes and queries run on worker threads of the store's own
(:mod:`hermes_store.aio.offload`), never on the event loop; concurrent writes
share commits (:mod:`hermes_store.uow.group`). See the guide "asyncio and shared
commits" (docs/guides/asyncio.md).
"""

from hermes_store.aio.session_db import AsyncSessionDB
from hermes_store.aio.store import AsyncStore
from hermes_store.uow.unit import load_repositories

load_repositories()  # here, before a loop runs, not in a worker thread while it does

__all__ = ["AsyncSessionDB", "AsyncStore"]
