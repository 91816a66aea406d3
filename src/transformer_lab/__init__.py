"""transformer_lab: the Transformer of "Attention Is All You Need", from scratch in PyTorch."""

__version__ = "0.1.0"
