"""The benchmark's cross-check: both sides answer the same questions before they are timed.

A timing of two implementations that answer differently compares different
work; the check is what makes the ratios mean anything, so it is tested on a
real corpus of the benchmark's own making.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.micro import workloads as W
from bench.micro.corpus import SEARCH_QUERIES
from bench.micro.impls import IMPLS
from bench.micro.run import _plain_match_ids, cross_check
from bench.paths import REPO_ROOT

SMALL = dataclasses.replace(W.QUICK, corpus_messages=3_000, long_session=300)


def test_a_small_corpus_cross_checks_identical(tmp_path: Path) -> None:
    ctx, facts = W.prepare(SMALL, tmp_path, REPO_ROOT)
    assert cross_check(ctx) == []

    plain = IMPLS["plain"].open(ctx.corpus)
    try:
        counts = {q: len(_plain_match_ids(plain, q)) for q in SEARCH_QUERIES}
    finally:
        plain.close()
    assert counts == facts["matches_per_query"]
