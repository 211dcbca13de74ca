"""One-off measurements behind a design decision, kept so their figures can be reproduced.

Each ran to settle one question; the answer and its figures are in the design
note its docstring names, and nothing else in ``bench/`` or ``tests/`` imports
it. They are kept runnable (``python -m bench.experiments.<name>``) rather than
dropped because the question comes back whenever the code under it changes:
rerun, compare with the note, update the note. One that no longer runs against
the head schema is to be dropped, not repaired: its note keeps the result.
"""
