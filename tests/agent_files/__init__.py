"""The agent's own files and class: state.db as upstream leaves it, the old SessionDB."""
