"""The library's public entry point: ``SessionDB`` (the old class's API), and the demo.

Nothing here holds a rule of the store: each call opens a unit of work and
asks the repositories, giving back the shapes the old API returns. The
``hermes-store`` command line is a package of its own, :mod:`hermes_store.cli`.
"""
