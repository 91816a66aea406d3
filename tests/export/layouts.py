"""The model layouts both exporters must map exactly, shared by their tests."""

# --set overrides of a translation checkpoint: our translation preset (post-norm, tied),
# pre-norm with gelu, and three separate matrices.
LAYOUTS = [
    [],
    ["model.norm_first=true", "model.activation=gelu"],
    ["model.tie_embeddings=none", "model.num_encoder_layers=2"],
]
LAYOUT_NAMES = ["post-norm-tied", "pre-norm-gelu", "untied"]
