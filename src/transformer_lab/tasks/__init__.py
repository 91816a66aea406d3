"""One module per application: its default config, data, model, loss and evaluation. Thin glue."""
