"""The commands, grouped by what they do; each group's module holds its part of the table.

:data:`COMMANDS` is the grammar ``hermes-store`` parses: one
:class:`~hermes_store.cli.args.Command` per verb, in the order the help lists
them. A command function takes its options as keyword arguments, and the
store it works on as ``target`` (:class:`~hermes_store.cli.target.Target`),
resolved by the dispatcher from --db, --url and --patience before it runs.
"""

from __future__ import annotations

from hermes_store.cli.args import Command
from hermes_store.cli.commands import reading, schema, transfer, upkeep, writing

COMMANDS: tuple[Command, ...] = (
    *schema.COMMANDS,
    *reading.COMMANDS,
    *transfer.COMMANDS,
    *writing.COMMANDS,
    *upkeep.COMMANDS,
    writing.DEMO,
)
"""Every command, in the order ``hermes-store --help`` lists them."""
