"""The tutorials' teaching material, made executable: the shape explainer, mask experiments, figures."""

from transformer_lab.lab.explain import explain_attention, explain_transformer, format_shape_walk

__all__ = ["explain_attention", "explain_transformer", "format_shape_walk"]
