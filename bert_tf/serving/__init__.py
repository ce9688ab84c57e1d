"""SavedModels: a task's serving signatures on token ids and on raw strings."""
