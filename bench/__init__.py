"""Benchmarks of hermes_store, each against a yardstick timed in the same run.

Grouped by what they measure (run every command from the repository root):

* ``bench/micro/`` -- ``python -m bench``: the per-call benchmark, the store
  against a plain-``sqlite3`` replica of the old store (``micro/plain.py``)
  and of the agent's own append (``micro/agent_plain.py``), workload by
  workload (``micro/workloads.py``); also the asyncio rows
  (``python -m bench.micro.aio``), instruction counts, profiles and memory
  probes.
* ``bench/field/`` -- ``python -m bench.field``: the million-message corpus
  (``field/corpus.py``) and its rows: search, listings, prune, the CLI's
  start, the same calls on PostgreSQL (``python -m bench.field.pg``), the
  move into and the upgrade on PostgreSQL.
* ``bench/ops/`` -- operating a store: fleets on one PostgreSQL server,
  backups, salvage of damaged files (the drills the test suite runs too).
* ``bench/experiments/`` -- one-off measurements behind a design decision,
  kept so the figure in its design note can be reproduced; nothing else
  imports them.

``stats.py`` (the arithmetic behind a verdict) and ``paths.py`` (the
repository root and ``bench/.work/``) are shared by all groups.
"""
