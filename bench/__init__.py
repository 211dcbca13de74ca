"""Benchmark: hermes_store against a plain-sqlite3 baseline of the old store's design.

Run ``python -m bench`` (or ``--quick``) from the repository root; see
``bench/__main__.py``. ``bench/plain.py`` is the baseline, ``bench/workloads.py``
the timed operations, ``bench/profile.py`` profiles the store side of one workload.
"""
