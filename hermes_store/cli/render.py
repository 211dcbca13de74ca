"""How ``hermes-store`` shows a session, a lineage, reports and surveys: rich tables and trees.

Imported only by the commands that print one (``sessions`` and ``search``
draw theirs in plain text, :mod:`.table`, to start fast).

Everything that comes out of the store (titles, message content, snippets) is
user data and may contain rich markup such as ``[bold]``; it only ever enters
a :class:`rich.text.Text` as plain text, never as markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from hermes_store.cli.output import printable
from hermes_store.cli.table import ROLE_STYLES, cost, number, when


def _text(value: object, style: str = "") -> Text:
    """Stored text as plain text: never markup, its control characters inert."""
    return Text(printable(str(value)), style=style)


def _role(role: str | None) -> Text:
    return _text(role or "?", ROLE_STYLES.get(role or "", "bold"))


# ----------------------------------------------------------------------
# sessions
# ----------------------------------------------------------------------
_SESSION_FIELDS = (
    ("title", "title"),
    ("source", "source"),
    ("model", "model"),
    ("user_id", "user"),
    ("parent_session_id", "parent"),
    ("started_at", "started"),
    ("ended_at", "ended"),
    ("end_reason", "end reason"),
    ("message_count", "messages"),
    ("tool_call_count", "tool calls"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("cache_read_tokens", "cache read tokens"),
    ("cache_write_tokens", "cache write tokens"),
    ("reasoning_tokens", "reasoning tokens"),
    ("estimated_cost_usd", "estimated cost"),
    ("actual_cost_usd", "actual cost"),
    ("cost_status", "cost status"),
    ("billing_provider", "billing provider"),
)


def session_details(session: Mapping[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("session", _text(session["id"], "bold"))
    for key, label in _SESSION_FIELDS:
        value = session.get(key)
        if value is None or (key.endswith("_tokens") and not value):
            continue
        if key in ("started_at", "ended_at"):
            shown = when(value)
        elif key.endswith("_cost_usd"):
            shown = cost(value)
        elif isinstance(value, int):
            shown = number(value)
        else:
            shown = str(value)
        grid.add_row(label, _text(shown))
    return grid


def _compact_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def message_block(message: Mapping[str, Any]) -> Group:
    header = Text()
    header.append(f"#{message.get('id')} ", style="dim")
    header.append_text(_role(message.get("role")))
    if message.get("tool_name"):
        header.append(printable(f" ({message['tool_name']})"), style="magenta")
    header.append(f"  {when(message.get('timestamp'))}", style="dim")
    if message.get("finish_reason"):
        header.append(printable(f"  finish: {message['finish_reason']}"), style="dim")
    if message.get("token_count") is not None:
        header.append(f"  {number(message['token_count'])} tokens", style="dim")
    body: list[Any] = [header]
    if message.get("reasoning"):
        body.append(Padding(_text(message["reasoning"], "dim italic"), (0, 0, 0, 2), expand=False))
    if message.get("content"):
        body.append(Padding(_text(message["content"]), (0, 0, 0, 2), expand=False))
    if message.get("tool_call_id"):
        reply = _text(f"↳ reply to {message['tool_call_id']}", "dim")
        body.append(Padding(reply, (0, 0, 0, 2), expand=False))
    if message.get("tool_calls"):
        calls = Text("tool calls: ", style="yellow")
        calls.append(printable(_compact_json(message["tool_calls"])), style="")
        body.append(Padding(calls, (0, 0, 0, 2), expand=False))
    return Group(*body)


def print_session(console: Console, session: Mapping[str, Any]) -> None:
    console.print(session_details(session))
    messages = session.get("messages") or []
    console.rule(f"{len(messages)} message(s)", style="dim")
    for message in messages:
        console.print(message_block(message))


# ----------------------------------------------------------------------
# lineage
# ----------------------------------------------------------------------
def _node_label(row: Mapping[str, Any], target: str) -> Text:
    label = _text(row["id"], "bold reverse" if row["id"] == target else "bold")
    if row.get("title"):
        label.append(printable(f"  {row['title']}"))
    label.append(f"  {when(row.get('started_at'))}", style="dim")
    return label


def lineage_tree(
    session_id: str,
    ancestors: Sequence[Mapping[str, Any]],
    descendants: Sequence[Mapping[str, Any]],
) -> Tree:
    """Oldest ancestor at the root, down to the session, then everything split off it."""
    chain = list(reversed(ancestors))  # root first; the session itself is last
    tree = Tree(_node_label(chain[0], session_id), guide_style="dim")
    node = tree
    for row in chain[1:]:
        node = node.add(_node_label(row, session_id))
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    for row in descendants:
        if row["id"] != session_id:
            children.setdefault(row.get("parent_session_id"), []).append(row)
    seen = {session_id}

    def grow(parent: Tree, parent_id: str) -> None:
        for child in sorted(children.get(parent_id, []), key=lambda r: r.get("started_at") or 0):
            if child["id"] in seen:  # a cycle in a damaged file: show each session once
                continue
            seen.add(child["id"])
            grow(parent.add(_node_label(child, session_id)), child["id"])

    grow(node, session_id)
    return tree


# ----------------------------------------------------------------------
# stats
# ----------------------------------------------------------------------
def usage_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="tokens and cost by model", title_justify="left")
    table.add_column("model", overflow="fold")
    table.add_column("sessions", justify="right")
    table.add_column("input", justify="right")
    table.add_column("output", justify="right")
    table.add_column("est. cost", justify="right")
    for row in rows:
        table.add_row(
            _text(row.get("model") or ""),
            number(row.get("session_count")),
            number(row.get("total_input")),
            number(row.get("total_output")),
            cost(row.get("total_cost")),
        )
    return table


def _whole(table: Table, header: str, cells: Sequence[str], **options: Any) -> None:
    """A column never wrapped nor cut: ids (people copy them), numbers, dates."""
    widest = max([len(header), *(cell_len(cell) for cell in cells)])
    table.add_column(header, no_wrap=True, min_width=widest, **options)


def _fitted(table: Table, width: int, leaving: Sequence[str]) -> Table:
    """``table`` without the columns of ``leaving`` (in order) its whole columns do not
    leave room for: a narrow terminal shows fewer columns rather than a cut id."""
    wrapping_least = 8

    def least() -> int:
        columns = table.columns
        inner = sum(c.min_width or 0 if c.no_wrap else wrapping_least for c in columns)
        return inner + 3 * len(columns) + 1

    for header in leaving:
        if least() <= width:
            break
        table.columns[:] = [c for c in table.columns if c.header != header]
    return table


def top_sessions_table(rows: Sequence[Mapping[str, Any]], width: int) -> Table:
    table = Table(title=f"top {len(rows)} session(s) by tokens", title_justify="left")
    tokens = [number(row.get("total_tokens")) for row in rows]
    costs = [cost(row.get("estimated_cost_usd")) for row in rows]
    _whole(table, "id", [str(row["id"]) for row in rows], style="bold")
    table.add_column("title", overflow="fold")
    table.add_column("model", overflow="fold")
    _whole(table, "tokens", tokens, justify="right")
    _whole(table, "est. cost", costs, justify="right")
    for row, used, spent in zip(rows, tokens, costs, strict=True):
        table.add_row(
            _text(row["id"]),
            _text(row.get("title") or ""),
            _text(row.get("model") or ""),
            used,
            spent,
        )
    return _fitted(table, width, ("model", "est. cost", "title"))


# ----------------------------------------------------------------------
# prune and check
# ----------------------------------------------------------------------
def prunable_table(rows: Iterable[Mapping[str, Any]], title: str, width: int) -> Table:
    rows = list(rows)
    table = Table(title=title, title_justify="left")
    started = [when(row.get("started_at")) for row in rows]
    ended = [when(row.get("ended_at")) for row in rows]
    counts = [number(row.get("message_count")) for row in rows]
    _whole(table, "id", [str(row["id"]) for row in rows], style="bold")
    table.add_column("title", overflow="fold")
    table.add_column("source")
    _whole(table, "started", started)
    _whole(table, "ended", ended)
    _whole(table, "messages", counts, justify="right")
    for row, began, stopped, count in zip(rows, started, ended, counts, strict=True):
        table.add_row(
            _text(row["id"]),
            _text(row.get("title") or ""),
            _text(row.get("source") or ""),
            began,
            stopped,
            count,
        )
    return _fitted(table, width, ("source", "started", "title"))


def miscounted_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="miscounted sessions", title_justify="left")
    _whole(table, "id", [str(row["id"]) for row in rows], style="bold")
    table.add_column("messages (stored → real)", justify="right")
    table.add_column("tool calls (stored → real)", justify="right")
    for row in rows:
        table.add_row(
            _text(row["id"]),
            f"{row['stored_messages']} → {row['real_messages']}",
            f"{row['stored_tool_calls']} → {row['real_tool_calls']}",
        )
    return table


def status_line(label: str, problem: str | None, fixed: bool = False) -> Text:
    line = Text(f"{label}: ")
    if problem is None:
        line.append("ok", style="green")
    elif fixed:
        line.append(problem, style="yellow")
        line.append(" (repaired)", style="green")
    else:
        line.append(problem, style="red")
    return line


def _ranges(ranges: Sequence[tuple[int, int]], shown: int = 8) -> str:
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:shown]]
    more = f" and {len(ranges) - shown} more range(s)" if len(ranges) > shown else ""
    return ", ".join(parts) + more


def recovery_summary(report: Any) -> Text:
    """What ``recover`` got back against what the damaged file claimed, and what it could not."""
    lines = [
        f"recovered {report.target} from {report.source} in {report.seconds:.1f} s "
        "(the source was only read)",
        f"  sessions: {report.sessions_recovered} of {report.sessions_claimed} the file knows of"
        + (
            f" ({len(report.sessions_rebuilt)} rebuilt from their messages, source 'unknown')"
            if report.sessions_rebuilt
            else ""
        ),
        f"  messages: {report.messages_recovered}; the file's counters claim "
        f"{report.messages_claimed}, its index lists {report.messages_indexed}",
    ]
    if report.orphan_rows:
        lines.append(
            f"  {report.orphan_rows} message(s) came from pages under a damaged page "
            "(out of reach of SQL)"
        )
    if report.unread_ranges:
        count = sum(b - a + 1 for a, b in report.unread_ranges)
        lines.append(f"  could not read {count} message id(s): {_ranges(report.unread_ranges)}")
    lines.extend(f"  note: {note}" for note in report.notes)
    return _text("\n".join(lines))


def damage_table(trees: Sequence[Any]) -> Table:
    """The damaged tables and indexes of a file: pages, damaged pages, what reads."""
    table = Table(title="damaged tables and indexes", title_justify="left")
    for column in ("name", "kind", "pages", "damaged pages", "readable", "unreadable"):
        table.add_column(column, justify="left" if column in ("name", "kind") else "right")
    for tree in trees:
        table.add_row(
            _text(tree.name),
            _text(tree.kind),
            number(tree.pages),
            number(len(tree.damaged_pages)),
            number(tree.readable),
            number(tree.unreadable),
        )
    return table
