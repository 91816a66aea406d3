"""One package per application (data, train, predict, evaluate; its TASK in ``__init__``), and the shared glue."""
