"""``python -m transformer_lab`` runs the console script (also under ``torchrun``)."""

import sys

from transformer_lab.console import main

sys.exit(main())
