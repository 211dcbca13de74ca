"""The public entry points: ``SessionDB`` (the old class's API), the ``hermes-store`` CLI, the demo.

Nothing here holds a rule of the store: each call opens a unit of work and
asks the repositories, giving back the shapes the old API returns.
"""
