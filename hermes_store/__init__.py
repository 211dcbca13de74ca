"""hermes_store: the Hermes agent's session store on SQLAlchemy.

``SessionDB`` is the drop-in facade; ``Store`` and its units of work are what
services receive by injection.
"""

from hermes_store.api.session_db import SessionDB
from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.domain.messages import MessageIn
from hermes_store.domain.usage import UsageReport
from hermes_store.errors import (
    InvalidInputError,
    ReadOnlyStoreError,
    ReadOnlyUnitError,
    SchemaError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    StoreAccessError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreNotFoundError,
    StoreReplacedError,
    StoreUnavailableError,
    TitleConflictError,
    UnknownBackendError,
)
from hermes_store.uow.store import Store
from hermes_store.uow.unit import UnitOfWork, UnitOfWorkFactory

__all__ = [
    "ContentionPolicy",
    "Durability",
    "InvalidInputError",
    "MessageIn",
    "ReadOnlyStoreError",
    "ReadOnlyUnitError",
    "SchemaError",
    "SessionBusyError",
    "SessionDB",
    "SessionExistsError",
    "SessionNotFoundError",
    "Store",
    "StoreAccessError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreReplacedError",
    "StoreUnavailableError",
    "TitleConflictError",
    "UnitOfWork",
    "UnitOfWorkFactory",
    "UnknownBackendError",
    "UsageReport",
]
