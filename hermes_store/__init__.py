"""hermes_store: the Hermes agent's session store on SQLAlchemy.

``SessionDB`` is the drop-in facade; ``Store`` and its units of work are what
services receive by injection.
"""

from .durability import Durability
from .engine import ContentionPolicy
from .errors import (
    InvalidInputError,
    ReadOnlyStoreError,
    SchemaError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    StoreAccessError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreNotFoundError,
    StoreReplacedError,
    StoreUnavailableError,
    TitleConflictError,
)
from .facade import SessionDB
from .store import Store
from .uow import UnitOfWork, UnitOfWorkFactory

__all__ = [
    "ContentionPolicy",
    "Durability",
    "InvalidInputError",
    "ReadOnlyStoreError",
    "SchemaError",
    "SessionBusyError",
    "SessionDB",
    "SessionExistsError",
    "SessionNotFoundError",
    "Store",
    "StoreAccessError",
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
]
