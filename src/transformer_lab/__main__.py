"""``python -m transformer_lab`` runs the console script (also under ``torchrun``)."""

import sys

from transformer_lab.cli import main

sys.exit(main())
