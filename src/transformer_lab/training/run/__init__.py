"""A run around its Trainer: how it starts, who may train its folder, whether a resume continues it, how it stops.

``plan``: what a run is made of and how it starts (fresh, resumed, fine-tuned); ``once_per_machine``: who prepares.
"""
