"""MetricsLog (metrics.jsonl) and the step-checkpoint rotation of run_folder."""

import json

import pytest

from transformer_lab.training.metrics_log import MetricsLog
from transformer_lab.training.run.run_folder import prune_step_checkpoints, step_folder_name


def test_append_writes_one_json_object_a_line_creating_the_folder(tmp_path):
    log = MetricsLog(tmp_path / "run")
    log.append({"event": "train", "step": 1, "train_loss": 2.5})
    log.append({"event": "eval", "step": 1, "bleu": 10.0})
    lines = (tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"event": "train", "step": 1, "train_loss": 2.5},
        {"event": "eval", "step": 1, "bleu": 10.0},
    ]


def test_truncate_after_drops_later_steps_and_a_line_cut_short(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"event": "train", "step": step} for step in (1, 2, 3, 4)] + [{"event": "eval", "step": 2}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"event": "tra', encoding="utf-8")
    MetricsLog(tmp_path).truncate_after(2)
    kept = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert kept == [{"event": "train", "step": 1}, {"event": "train", "step": 2}, {"event": "eval", "step": 2}]
    assert sorted(item.name for item in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temporary left
    MetricsLog(tmp_path / "none").truncate_after(0)  # no log yet: nothing to cut, no file made
    assert not (tmp_path / "none").exists()


def test_truncate_after_drops_a_last_line_cut_inside_a_character(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"event": "train", "step": 1}\n{"event": "eval", "note": "\xe4')
    MetricsLog(tmp_path).truncate_after(1)
    assert path.read_bytes() == b'{"event": "train", "step": 1}\n'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"event": "note", "step": "a"}', """expected a non-negative int 'step', got "a\""""),
        (b'{"event": "train", "step": true}', "expected a non-negative int 'step', got true"),
        (b'{"event": "train"}', "expected an object with 'event' and 'step'"),
        (b"[1, 2]", "expected an object with 'event' and 'step'"),
        (b"not json", "expected a JSON object, got text that is not JSON"),
        (b'{"event": "train", "step": 1, "x": "\xff"}', "expected UTF-8 text, got invalid start byte"),
    ],
)
def test_truncate_after_refuses_a_line_that_is_no_row_naming_it_and_keeps_the_log(tmp_path, line, message):
    path = tmp_path / "metrics.jsonl"
    # not the last line: a crash cuts only the line being written, so this one is not a crash's
    content = b'{"event": "train", "step": 1}\n' + line + b'\n{"event": "train", "step": 2}\n'
    path.write_bytes(content)
    with pytest.raises(ValueError) as refused:
        MetricsLog(tmp_path).truncate_after(1)
    assert str(refused.value).startswith(f"{path}: line 2: {message}")
    assert path.read_bytes() == content
    assert sorted(item.name for item in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_prune_step_checkpoints_keeps_the_highest_steps(tmp_path):
    for step in (9, 10, 100, 2):
        (tmp_path / step_folder_name(step)).mkdir()
    (tmp_path / "last").mkdir()
    (tmp_path / "step-notes.txt").write_text("not a checkpoint", encoding="utf-8")
    assert step_folder_name(100) == "step-000100"
    assert prune_step_checkpoints(tmp_path, keep_last=2) == ["step-000002", "step-000009"]
    assert sorted(item.name for item in tmp_path.iterdir()) == ["last", "step-000010", "step-000100", "step-notes.txt"]
    assert prune_step_checkpoints(tmp_path, keep_last=0) == ["step-000010", "step-000100"]
