"""``transformer-lab serve``: a local web page to try trained models and look inside them.

One FastAPI app (:func:`create_app`) serves a static page (``static/``: HTML, JS and CSS
written for this project, heat-maps drawn on ``<canvas>``) and a JSON API. Each served task
declares its endpoints and handler (``Task.serving``), keyed by the ``task`` that a
checkpoint's ``config.json`` names; :func:`load_served_models` loads each checkpoint once
through its task's predictor. The masks view (``masks_view``) needs no model.
"""

from transformer_lab.serve.app import create_app
from transformer_lab.serve.registry import ServedModel, load_served_models

__all__ = ["ServedModel", "create_app", "load_served_models"]
