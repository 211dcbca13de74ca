"""Where the benchmarks run from and where they keep their files.

One place for both, so a module can move between the groups of ``bench/``
without its files moving: every runner starts its child processes
(``python -m bench....``) from the repository root, and every corpus,
template and throwaway copy lives under ``bench/.work/`` (ignored by git),
whichever group made it.
"""

from __future__ import annotations

from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_ROOT = BENCH_DIR / ".work"
