"""The rows of one planned session: its ``sessions`` row and its messages.

An agent turn is a user message, a few tool rounds (an assistant message
with ``tool_calls``, one ``tool`` row per call) and a final answer; cron runs
start from their job's fixed prompt, subagents from a delegated goal.
Timestamps spread the session's planned duration over its messages (people
think longer than tools run). Everything is drawn from the plan's own seed,
so a session's rows never depend on which other sessions were written first.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from .plan import MODELS, SessionPlan
from .text import TextWriter

MessageRow = tuple[
    str, str, str | None, str | None, str | None, str | None, float, int | None, str | None,
    str | None, None, None,
]  # fmt: skip
"""session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count,
finish_reason, reasoning, reasoning_details, codex_reasoning_items (INSERT order)."""

SESSION_COLUMNS = (
    "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
    "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd",
    "actual_cost_usd", "cost_status", "cost_source", "pricing_version", "title",
)  # fmt: skip
MESSAGE_COLUMNS = (
    "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
    "token_count", "finish_reason", "reasoning", "reasoning_details", "codex_reasoning_items",
)  # fmt: skip

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_PACE = {"user": 6.0, "assistant": 0.6, "tool": 0.2}
"""Mean relative gap before a message of each role."""
_MODEL_CONFIGS = (
    '{"temperature": 0.7, "max_tokens": 8192}',
    '{"temperature": 1.0, "reasoning_effort": "medium"}',
    '{"max_tokens": 32000, "tool_choice": "auto"}',
    None,
)


@dataclass
class SessionRows:
    """A session ready to insert, and what the corpus report counts about it."""

    session: tuple[object, ...]
    messages: list[MessageRow]
    tool_calls: int
    cjk_messages: int


def cron_prompt(job: int, lang: str) -> str:
    """A cron job's standing instruction (the same for every run of the job)."""
    writer = TextWriter(random.Random(9000 + job))
    if lang == "zh":
        return "定时任务：" + writer.cjk("zh", writer.rng.randint(10, 40))
    return "Scheduled task: " + writer.prose(writer.rng.randint(15, 60))


def session_rows(plan: SessionPlan) -> SessionRows:
    """The ``sessions`` row and the messages of ``plan``, with consistent counters."""
    writer = TextWriter(random.Random(plan.seed))
    rng = writer.rng
    body, calls = _messages(plan, writer)
    times = _timestamps(rng, plan, [role for role, *_rest in body])
    messages: list[MessageRow] = [
        (plan.id, role, content, call_id, tool_calls, tool_name, at, tokens, finish, reasoning,
         None, None)
        for (role, content, call_id, tool_calls, tool_name, tokens, finish, reasoning), at
        in zip(body, times, strict=True)
    ]  # fmt: skip
    cjk = 0
    if plan.lang != "en":
        cjk = sum(1 for m in messages if m[2] and _CJK.search(m[2]))
    return SessionRows(_session_row(plan, rng, calls), messages, calls, cjk)


def _messages(plan: SessionPlan, w: TextWriter) -> tuple[list[tuple[object, ...]], int]:
    rng, lang, size = w.rng, plan.lang, plan.messages
    rows: list[tuple[object, ...]] = []
    calls = 0
    while len(rows) < size:
        if plan.kind == "cron" and not rows:
            opening = cron_prompt(plan.cron_job or 0, lang)
        elif plan.kind == "subagent" and not rows:
            opening = "Goal: " + w.prose(rng.randint(10, 50))
        else:
            opening = w.talk(lang, 3, 80)
        rows.append(("user", opening, None, None, None, None, None, None))
        rounds = 0 if rng.random() < 0.3 else min(12, 1 + int(rng.expovariate(0.35)))
        for _round in range(rounds):
            if len(rows) >= size:
                break
            count = 1 if rng.random() < 0.75 else rng.randint(2, 3)
            calls_json, pairs = w.tool_calls(count)
            r = rng.random()
            text = None if r < 0.3 else ("" if r < 0.4 else w.talk(lang, 3, 30))
            reasoning = w.reasoning(rng.randint(15, 120)) if rng.random() < 0.25 else None
            tokens = rng.randint(20, 400)
            rows.append(
                ("assistant", text, None, calls_json, None, tokens, "tool_calls", reasoning)
            )
            calls += count
            for call_id, name, path in pairs:
                if len(rows) >= size:
                    break
                output = w.tool_output(name, path)
                rows.append(("tool", output, call_id, None, name, None, None, None))
        if len(rows) < size:
            answer = w.talk(lang, 15, 350)
            if rng.random() < 0.2:
                code = "\n".join(w.code_line() for _ in range(rng.randint(3, 25)))
                answer += f"\n\n```python\n{code}\n```"
            reasoning = w.reasoning(rng.randint(20, 200)) if rng.random() < 0.3 else None
            tokens = len(answer) // 4 + rng.randint(5, 50)
            rows.append(("assistant", answer, None, None, None, tokens, "stop", reasoning))
    return rows, calls


def _timestamps(rng: random.Random, plan: SessionPlan, roles: list[str]) -> list[float]:
    """Times within the planned duration, gaps by role (the first message at the start)."""
    gaps = [rng.expovariate(1.0 / _PACE[role]) for role in roles[1:]]
    total = sum(gaps) or 1.0
    scale = plan.duration / total
    at = plan.started_at + rng.uniform(0.01, 0.5)
    times = [at]
    for gap in gaps:
        at += gap * scale
        times.append(at)
    return times


def _session_row(plan: SessionPlan, rng: random.Random, calls: int) -> tuple[object, ...]:
    n = plan.messages
    model = plan.model if rng.random() > 0.015 else None
    _weight, per_in, per_out = MODELS.get(plan.model or "", (0, 1.0, 4.0))
    inp = int(n * rng.uniform(1_500, 9_000))
    out = int(n * rng.uniform(60, 500))
    anthropic = (plan.model or "").startswith("anthropic/")
    cache_read = int(inp * rng.uniform(0.3, 0.9 if anthropic else 0.5))
    cache_write = int(inp * rng.uniform(0.0, 0.08)) if anthropic else 0
    reasoning = int(out * rng.uniform(0.0, 0.6)) if "gpt-5" in (plan.model or "") else 0
    cost = round((inp - cache_read) * per_in / 1e6 + out * per_out / 1e6, 6)
    via_router = rng.random() < 0.6
    provider = "openrouter" if via_router else (plan.model or "local/unknown").split("/")[0]
    base_url = "https://openrouter.ai/api/v1" if via_router else f"https://api.{provider}.com/v1"
    actual = round(cost * rng.uniform(0.9, 1.1), 6) if rng.random() < 0.15 else None
    prompt = None
    if plan.prompt_variant is not None:
        prompt = TextWriter(rng).system_prompt(plan.prompt_variant, int(plan.started_at // 86400))
    return (
        plan.id,
        plan.source,
        plan.user_id,
        model,
        rng.choice(_MODEL_CONFIGS),
        prompt,
        plan.parent.id if plan.parent is not None else None,
        plan.started_at,
        plan.ended_at,
        plan.end_reason,
        n,
        calls,
        inp,
        out,
        cache_read,
        cache_write,
        reasoning,
        provider,
        base_url,
        "api",
        cost,
        actual,
        "estimated" if actual is None else "actual",
        "pricing_table",
        "2026-11",
        plan.title,
    )
