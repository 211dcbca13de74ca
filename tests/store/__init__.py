"""The store itself: the facade, ORM, engines, schema and migrations, kept totals, input rules."""
