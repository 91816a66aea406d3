"""A run around its Trainer: who may train its folder, whether a resume continues it, who prepares, how it stops."""
