"""Who talked when: the 50,000 sessions of a field-size state.db, before any text.

Listings, title lookups, lineage walks and pruning cost what the *sessions*
look like, so they are planned first, cheaply, from one seed: sources and
models in the proportions a busy gateway shows (a fifth of all sessions are
cron runs, as in the public 54,647-session report), titles with lineages
("T", "T #2", ...: compression chains and repeated cron jobs), parents and
children (compression continuations started after their parent ended,
subagents and branches started while it ran), ended and open sessions over
90 days. Each plan carries its own seed, so its messages can be written
later, in any order, always the same.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from .text import TextWriter

T_END = 1_796_000_000.0
"""The corpus's "now" (2026-11-30 UTC): the newest session starts a little before it."""
DAY = 86_400.0

SOURCES = {
    "cli": 30,
    "telegram": 24,
    "discord": 12,
    "slack": 6,
    "whatsapp": 3,
    "signal": 1,
    "api": 4,
}
"""Weights of the interactive sources; ``cron`` comes on top (CRON_SHARE)."""
CRON_SHARE = 0.20
CRON_JOBS = 114
SUBAGENT_SHARE = 0.07
BRANCH_SHARE = 0.01
CHAIN_SHARE = 0.02
"""Conversations (as a share of all sessions) that compression split into a chain."""
LANGS = {"en": 850, "zh": 90, "ja": 35, "ko": 25}
MODELS = {
    "anthropic/claude-sonnet-4.6": (35, 3.0, 15.0),
    "anthropic/claude-opus-4.1": (6, 15.0, 75.0),
    "openai/gpt-5": (20, 1.25, 10.0),
    "openai/gpt-5-mini": (10, 0.25, 2.0),
    "google/gemini-2.5-pro": (10, 1.25, 10.0),
    "google/gemini-2.5-flash": (8, 0.3, 2.5),
    "deepseek/deepseek-v3.2": (6, 0.28, 0.42),
    "qwen/qwen3-coder": (3, 0.22, 0.95),
}
"""Model: (weight, USD per million input tokens, per million output tokens)."""
CHAT_END_REASONS = ("user_exit", "user_exit", "session_reset", "idle_timeout", "error")


@dataclass(slots=True)
class SessionPlan:
    """One session as planned: everything but its messages' text."""

    seed: int
    kind: str  # chat, continuation, subagent, branch, cron
    source: str
    lang: str
    model: str | None
    started_at: float
    duration: float
    messages: int
    id: str = ""
    user_id: str | None = None
    parent: SessionPlan | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    title: str | None = None
    prompt_variant: int | None = None
    cron_job: int | None = None
    chain: list[SessionPlan] = field(default_factory=list)
    """On a chain's first session: its compression continuations, in order."""
    continued: bool = False
    """Compression split this session: it ended so that the next one could go on."""


def _weighted(rng: random.Random, weights: dict[str, object], k: int) -> list[str]:
    names = list(weights)
    values = [w[0] if isinstance(w, tuple) else w for w in weights.values()]
    return rng.choices(names, weights=values, k=k)  # type: ignore[arg-type]


def _chat_size(rng: random.Random) -> int:
    """Messages of an interactive conversation: log-normal, most short, a few huge."""
    return max(2, min(5_000, int(rng.lognormvariate(2.6, 1.2))))


def plan_sessions(sessions: int, messages: int, seed: int) -> list[SessionPlan]:
    """``sessions`` plans holding ``messages`` messages in all, sorted by start time."""
    rng = random.Random(seed)
    start, end = T_END - 90 * DAY, T_END - 0.5 * DAY
    n_cron = round(sessions * CRON_SHARE)
    n_sub = round(sessions * SUBAGENT_SHARE)
    n_branch = round(sessions * BRANCH_SHARE)
    n_chains = max(1, round(sessions * CHAIN_SHARE))
    links = [min(15, 1 + int(rng.expovariate(0.45))) for _ in range(n_chains)]
    n_roots = sessions - n_cron - n_sub - n_branch - sum(links)
    if n_roots < n_chains:
        raise ValueError(f"{sessions} sessions are too few for the planned lineage")

    def new(
        kind: str, source: str, lang: str, model: str | None, at: float, size: int
    ) -> SessionPlan:
        return SessionPlan(rng.getrandbits(48), kind, source, lang, model, at, 0.0, size)

    roots = [
        new(kind="chat", source=src, lang=lang, model=model, at=rng.uniform(start, end), size=0)
        for src, lang, model in zip(
            _weighted(rng, SOURCES, n_roots),
            _weighted(rng, LANGS, n_roots),
            _weighted(rng, MODELS, n_roots),
            strict=True,
        )
    ]
    for plan in roots:
        plan.messages = _chat_size(rng)
    chain_roots = rng.sample(roots, n_chains)
    for root, count in zip(chain_roots, links, strict=True):
        root.messages = rng.randint(20, 90)
        root.chain = [
            new("continuation", root.source, root.lang, root.model, 0.0, rng.randint(20, 90))
            for _ in range(count)
        ]
    children = []
    # A branch may start after its parent ended; of a compressed parent it would then
    # pass for a continuation, so branches only come off conversations that were not.
    unsplit = [r for r in roots if not r.chain]
    for kind, count in (("subagent", n_sub), ("branch", n_branch)):
        for parent in rng.choices(roots if kind == "subagent" else unsplit, k=count):
            size = rng.randint(8, 80) if kind == "subagent" else _chat_size(rng)
            child = new(kind, parent.source, parent.lang, parent.model, 0.0, size)
            child.parent = parent
            children.append(child)
    job_sizes = [rng.randint(2, 12) for _ in range(CRON_JOBS)]
    job_weights = [rng.paretovariate(1.2) for _ in range(CRON_JOBS)]
    job_models = _weighted(rng, MODELS, CRON_JOBS)
    job_langs = _weighted(rng, {"en": 85, "zh": 15}, CRON_JOBS)
    crons = []
    for job in rng.choices(range(CRON_JOBS), weights=job_weights, k=n_cron):
        plan = new("cron", "cron", job_langs[job], job_models[job], 0.0, job_sizes[job])
        plan.cron_job = job
        crons.append(plan)
    _fit_total(roots + children, messages - sum(c.messages for c in crons), chain_roots)
    _place_in_time(rng, roots, children, crons, start, end)
    everything = roots + [c for r in chain_roots for c in r.chain] + children + crons
    everything.sort(key=lambda p: (p.started_at, p.seed))
    _end_and_title(rng, everything)
    _name(rng, everything)
    return everything


def _fit_total(sized: list[SessionPlan], total: int, chain_roots: list[SessionPlan]) -> None:
    """Scale the conversations' sizes so every session's messages add up to ``total``."""
    fixed = sum(c.messages for r in chain_roots for c in r.chain)
    scalable = [p for p in sized if not p.chain]
    want = total - fixed - sum(p.messages for p in sized if p.chain)
    have = sum(p.messages for p in scalable)
    if want < 2 * len(scalable):
        raise ValueError("too few messages for the planned sessions")
    factor = want / have
    for plan in scalable:
        plan.messages = max(2, round(plan.messages * factor))
    # Rounding leaves a few over or under: take them from, or give them to, the largest.
    by_size = sorted(scalable, key=lambda p: -p.messages)
    diff = want - sum(p.messages for p in scalable)
    step = 1 if diff > 0 else -1
    index = 0
    while diff:
        plan = by_size[index % len(by_size)]
        if plan.messages + step >= 2:
            plan.messages += step
            diff -= step
        index += 1


def _place_in_time(
    rng: random.Random,
    roots: list[SessionPlan],
    children: list[SessionPlan],
    crons: list[SessionPlan],
    start: float,
    end: float,
) -> None:
    """Durations from per-message pace; chains follow their parent's end, children its run."""
    for plan in roots:
        plan.duration = plan.messages * rng.uniform(4.0, 40.0)
        previous = plan
        for link in plan.chain:
            # The continuation starts after its parent's end (start + duration + 1 s).
            link.started_at = previous.started_at + previous.duration + rng.uniform(2.0, 40.0)
            link.duration = link.messages * rng.uniform(4.0, 40.0)
            link.parent = previous
            previous.continued = True
            previous = link
    for child in children:
        parent = child.parent
        assert parent is not None
        child.duration = child.messages * rng.uniform(2.0, 20.0)
        reach = 0.9 if child.kind == "subagent" else 1.5
        child.started_at = parent.started_at + rng.uniform(0.05, reach) * max(parent.duration, 60)
    by_job: dict[int, list[SessionPlan]] = {}
    for plan in crons:
        by_job.setdefault(plan.cron_job or 0, []).append(plan)
    for runs in by_job.values():
        every = (end - start) / len(runs)
        phase = rng.uniform(0, every)
        for number, plan in enumerate(runs):
            plan.started_at = start + phase + number * every + rng.uniform(0, 30)
            plan.duration = plan.messages * rng.uniform(1.0, 6.0)


def _end_and_title(rng: random.Random, plans: list[SessionPlan]) -> None:
    """End reasons (a few recent sessions still open), titles unique with their lineages."""
    titles: set[str] = set()
    writer = TextWriter(rng)

    def unique(base: str) -> str | None:
        return None if base in titles else base

    cron_titles: dict[int, tuple[str, int]] = {}
    for plan in plans:
        recent = plan.started_at > T_END - 2 * DAY
        open_ = rng.random() < (0.4 if recent else 0.005)
        if plan.continued:
            plan.ended_at = plan.started_at + plan.duration + 1.0
            plan.end_reason = "compression"
        elif plan.kind == "cron" or not open_:
            plan.ended_at = plan.started_at + plan.duration + rng.uniform(1.0, 30.0)
            plan.end_reason = {
                "cron": "cron_complete",
                "subagent": "delegate_complete",
                "branch": "user_exit",
            }.get(plan.kind) or rng.choice(CHAT_END_REASONS)
        plan.prompt_variant = rng.randrange(24) if rng.random() < 0.9 else None
        if plan.kind == "cron":
            job = plan.cron_job or 0
            base, runs = cron_titles.get(job) or (f"Cron: {writer.title()}", 0)
            while runs == 0 and base in titles:
                base = f"Cron: {writer.title()}"
            cron_titles[job] = (base, runs + 1)
            plan.title = base if runs == 0 else f"{base} #{runs + 1}"
        elif plan.kind == "chat" and (plan.chain or rng.random() < 0.7):
            for _attempt in range(3):
                plan.title = unique(writer.title())
                if plan.title:
                    break
            if plan.chain and plan.title is None:
                plan.title = f"{writer.title()} {plan.seed:x}"
        elif plan.kind == "continuation":
            root = plan.parent
            while root is not None and root.kind == "continuation":
                root = root.parent
            number = 2 + _depth(plan)
            plan.title = f"{root.title} #{number}" if root and root.title else None
        if plan.title is not None:
            if plan.title in titles:
                plan.title = None
            else:
                titles.add(plan.title)


def _depth(plan: SessionPlan) -> int:
    depth = 0
    parent = plan.parent
    while parent is not None and parent.kind == "continuation":
        depth += 1
        parent = parent.parent
    return depth


def _name(rng: random.Random, plans: list[SessionPlan]) -> None:
    """Ids as the agent makes them: ``YYYYMMDD_HHMMSS_<6 hex>``; gateway users per source."""
    seen: set[str] = set()
    for plan in plans:
        stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(plan.started_at))
        while True:
            session_id = f"{stamp}_{rng.getrandbits(24):06x}"
            if session_id not in seen:
                break
        seen.add(session_id)
        plan.id = session_id
        if plan.source not in ("cli", "cron", "api"):
            plan.user_id = f"{plan.source}:{rng.randint(1, 40) * 7919 + 100_000}"
