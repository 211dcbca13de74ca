"""Full-text search: query syntax, routes, CJK, ranking windows, the indexes behind them."""
