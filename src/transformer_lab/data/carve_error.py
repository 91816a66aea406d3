"""`CarveError`: a validation carve refused, in words that a command can say in the user's own names."""

from __future__ import annotations

from transformer_lab.setting_error import PhrasedError


class CarveError(PhrasedError):
    """A carve of validation out of the training data refused, naming the data settings that steer it.

    ``str(error)`` names each setting as the data config's key (``data.valid_files``), as the
    Python API sets it; :meth:`phrased` names each as ``name_of(field)`` says, so that a
    command can name the validation files ``--valid`` only where its user gave ``--train``.
    ``settings`` are the data config's field names the template's fields stand for;
    ``values`` the other fields it quotes.
    """

    @staticmethod
    def default_name(setting: str) -> str:
        """A data config's field as its key: ``data.valid_files``."""
        return f"data.{setting}"


def nothing_left_to_train(count: int, held: int, examples: str, texts: str, validation: str) -> CarveError:
    """The carve refused where every training example repeats a held-out one's text (one text, copied).

    ``examples`` names them ("pairs", "rows"), ``texts`` what of them repeats ("source sentences",
    "texts"), ``validation`` what to give instead ("validation files").
    """
    scored = texts.split()[-1]  # "source sentences" are scored as sentences
    return CarveError(
        f"{{valid_files}}: expected {validation}, or training {examples} other than the held-out ones, got {{count}} "
        f"{examples} whose {texts} the {{held}} held-out {examples} all repeat (validation would score {scored} the "
        f"model learned, so they are left out of training); give {validation} ({{valid_files}}) or more varied "
        f"{examples}",
        ("valid_files",),
        count=count,
        held=held,
    )
