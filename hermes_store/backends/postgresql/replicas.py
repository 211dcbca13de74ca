"""How far a PostgreSQL streaming replica is behind its primary, for the read route.

The probe asks the primary where its WAL ends (``pg_current_wal_lsn()``) and
the replica how much of that it has replayed (``pg_last_wal_replay_lsn()``).
A replica that has replayed up to there is current, however long ago its last
transaction was; one that has not is behind by the time since the last
transaction it replayed (``pg_last_xact_replay_timestamp()``, on the
replica's clock): an overestimate when the primary was idle before its newest
write, which only sends a few more reads to the primary. A replica that is
not in recovery (promoted, or a primary named as ``read_url``) is current.

A replica is the primary's database on a copy of its cluster, so both name the
same cluster (``pg_control_system()``'s system identifier, which a streaming
standby keeps) and the same database (its name and oid). A server that does not
is another store: never read from, whatever its state, lest its sessions be
served as this store's.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Engine

from hermes_store.backends.read_route import ReplicaReading, ReplicaState

_IDENTITY = (
    "(SELECT system_identifier FROM pg_control_system())::text "
    "|| '/' || current_database() || ' (oid ' "
    "|| (SELECT oid FROM pg_database WHERE datname = current_database())::text || ')'"
)
"""Cluster and database, as one text: equal on a primary and its streaming replicas."""
_PRIMARY_END = text(f"SELECT pg_current_wal_lsn()::text, {_IDENTITY}")
_REPLICA_POSITION = text(
    "SELECT pg_is_in_recovery(), "
    "pg_wal_lsn_diff(CAST(:p_end AS pg_lsn), pg_last_wal_replay_lsn()), "
    "EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), "
    f"{_IDENTITY}"
)


def measure_replica(primary: Engine, replica: Engine, max_lag_s: float) -> ReplicaReading:
    """The replica's state against the primary's; never raises (a failure is a reading)."""
    try:
        with primary.connect() as connection:
            end, primary_is = connection.execute(_PRIMARY_END).one()
    except Exception as error:
        # Without the primary's position the lag is unknown; reads then meet the
        # primary's own failure, as they would without a replica.
        return ReplicaReading(ReplicaState.LAGGING, None, f"primary not reached: {_line(error)}")
    try:
        with replica.connect() as connection:
            recovering, behind, since, replica_is = connection.execute(
                _REPLICA_POSITION, {"p_end": end}
            ).one()
    except Exception as error:
        return ReplicaReading(ReplicaState.DOWN, None, _line(error))
    if replica_is != primary_is:
        return ReplicaReading(
            ReplicaState.DOWN,
            None,
            f"not a replica of the primary: it is cluster/database {replica_is}, "
            f"the primary {primary_is}",
        )
    if not recovering or behind is None or behind <= 0:
        return ReplicaReading(ReplicaState.OK, 0.0, "replayed up to the primary's WAL end")
    if since is None:
        return ReplicaReading(ReplicaState.LAGGING, None, f"{behind} bytes behind, no replay yet")
    lag = max(0.0, float(since))
    state = ReplicaState.OK if lag <= max_lag_s else ReplicaState.LAGGING
    return ReplicaReading(state, lag, f"{behind} bytes and {lag:.1f} s behind")


def _line(error: BaseException) -> str:
    text_ = str(error).strip()
    return text_.splitlines()[0] if text_ else type(error).__name__
