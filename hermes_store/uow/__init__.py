"""Units of work and the store that hands them out: what agent services receive.

A :class:`~hermes_store.uow.store.Store` owns one engine and opens units of
work (:mod:`hermes_store.uow.unit`) on kept per-thread connections; the
failures of a unit are named in the store's own errors here too.
"""
