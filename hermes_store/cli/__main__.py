"""``python -m hermes_store.cli``: the ``hermes-store`` console script, from a checkout."""

from hermes_store.cli import main

main()
