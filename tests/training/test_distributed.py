"""DistributedDataParallel under torchrun: 2 CPU processes (gloo) equal 1 on the global batch.

The oracle of the two-process runs is the plain single-process Trainer trained on the
global batches: at each micro-step the two ranks' token-budget batches merged into one.
Equal weights after a few steps (with accumulation, clipping, a group cut short by the end
of an epoch, and a batch whose loss is NaN on one rank only) check the sharding, DDP's
gradient averaging, the per-token loss normalisation across ranks and their agreement on
skipping; equal metrics rows check the reduced losses; one run folder
with the single run's files checks that rank 0 alone writes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.training import ddp_worker
from transformer_lab.cli import main
from transformer_lab.data import balance_batches_for_shards
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import DataParallel, launch_from_environment, load_model_weights
from transformer_lab.training.distributed import Launch

REPOSITORY = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(
    arguments: list[str],
    cwd: Path,
    timeout: float = 900,
    processes: int = ddp_worker.WORLD_SIZE,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``python -m torch.distributed.run`` on ``processes`` local processes, on 127.0.0.1 and a free port.

    ``check``: fail the test unless the launch exits 0.
    """
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY / "src"), str(REPOSITORY), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment["OMP_NUM_THREADS"] = "1"
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        environment.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(processes),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        *arguments,
    ]
    # The generous timeout is for a niced run on cores busy with other jobs (measured: 7
    # minutes there, 20 s of CPU). A session of its own, so that a hang ends with the
    # workers killed too, not orphaned.
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"torchrun timed out after {timeout} s:\n{stdout}\n{stderr}")
    assert process.returncode == 0 or not check, f"torchrun failed ({process.returncode}):\n{stdout}\n{stderr}"
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def without_key_biases(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with the key part of every attention's in_proj_bias zeroed.

    The key bias adds the same q . b_k to all scores of a query row, which the softmax
    ignores: its true gradient is zero, and the float noise it gets instead (about 1e-9)
    Adam turns into steps of +-lr whose sign differs between any two summation orders.
    It does not change the model's outputs (compared in full below).
    """
    cleaned = {}
    for name, tensor in state.items():
        if name.endswith("in_proj_bias"):
            tensor = tensor.clone()
            third = tensor.shape[0] // 3
            tensor[third : 2 * third] = 0.0
        cleaned[name] = tensor
    return cleaned


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ddp")
    torchrun(["-m", "tests.training.ddp_worker", str(root)], cwd=REPOSITORY)
    return root


def rows(run_folder: Path) -> list[dict]:
    return [json.loads(line) for line in (run_folder / "metrics.jsonl").read_text().splitlines()]


def files_of(run_folder: Path) -> set[str]:
    return {str(path.relative_to(run_folder)) for path in run_folder.rglob("*")}


@pytest.mark.parametrize("scenario", list(ddp_worker.SCENARIOS))
def test_two_ranks_equal_one_process_on_the_global_batch(two_process_runs: Path, tmp_path: Path, scenario: str) -> None:
    reference_model, reference_trainer = ddp_worker.run_scenario(tmp_path, scenario, ddp_worker.merged_batches)
    reference = without_key_biases(reference_model.state_dict())
    ranks = [torch.load(two_process_runs / f"{scenario}-rank{rank}.pt") for rank in range(ddp_worker.WORLD_SIZE)]

    validation = ddp_worker.collate(ddp_worker.VALIDATION)
    reference_logits = reference_model(validation.src_ids, validation.tgt_in_ids)
    for result in ranks:
        state = without_key_biases(result["state"])
        assert state.keys() == reference.keys()
        for name, tensor in reference.items():
            torch.testing.assert_close(state[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
        model = ddp_worker.make_model()
        model.load_state_dict(result["state"])
        torch.testing.assert_close(
            model(validation.src_ids, validation.tgt_in_ids), reference_logits, rtol=1e-4, atol=1e-5
        )
        # Rank 0 evaluates; every rank holds its metrics.
        assert result["last_metrics"] == pytest.approx(reference_trainer.last_metrics, rel=1e-4)
    # DDP keeps the ranks' weights identical, not merely close.
    for name, tensor in ranks[0]["state"].items():
        assert torch.equal(tensor, ranks[1]["state"][name]), name

    run_folder = two_process_runs / scenario
    # One run folder, written by rank 0 alone: the same files as the single run, no leftovers.
    assert files_of(run_folder) == files_of(tmp_path / scenario)
    # The checkpoint holds the unwrapped model (no "module." prefix) with the trained weights.
    loaded = ddp_worker.make_model()
    load_model_weights(run_folder / "last", loaded)
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, ranks[0]["state"][name]), name
    # Each step logged once, with the loss of the whole global batch.
    ddp_rows, reference_rows = rows(run_folder), rows(tmp_path / scenario)
    assert [(row["event"], row["step"]) for row in ddp_rows] == [(row["event"], row["step"]) for row in reference_rows]
    for ddp_row, reference_row in zip(ddp_rows, reference_rows):
        for key in ("train_loss", "grad_norm", "val_loss"):
            if key in reference_row:
                assert ddp_row[key] == pytest.approx(reference_row[key], rel=1e-4), (ddp_row, reference_row)


def test_the_scenarios_cover_uneven_ranks_a_skipped_batch_and_a_group_cut_by_the_epoch_end(
    two_process_runs: Path,
) -> None:
    # Guards the test above: it only checks the per-token weighting if the ranks' batches
    # at a micro-step hold different token counts, the agreement on a non-finite loss if
    # one rank alone has it, and the no_sync catch-up if a group ends on a batch that did
    # not all-reduce (cut by the epoch end, or skipped).
    balanced, _ = balance_batches_for_shards(ddp_worker.epoch_index_batches(0), ddp_worker.WORLD_SIZE)
    lengths = ddp_worker.collated_lengths(ddp_worker.PAIRS)
    tokens = [sum(lengths[index][1] for index in batch) for batch in balanced]
    assert tokens[0::2] != tokens[1::2]
    poisoned = [ddp_worker.PAIRS[index][0] for batch in balanced for index in batch].count(
        ddp_worker.PAIRS[ddp_worker.POISONED_PAIR][0]
    )
    assert poisoned == 1 and ddp_worker.POISONED_PAIR in balanced[3]  # rank 1, a group's last batch
    batches_per_epoch = torch.load(two_process_runs / "accumulate-2-rank0.pt")["batches_per_epoch"]
    steps = ddp_worker.SCENARIOS["accumulate-2"][1]
    assert batches_per_epoch % 2 == 1 and steps * 2 > batches_per_epoch


def test_a_resumed_two_process_run_equals_the_uninterrupted_one(two_process_runs: Path) -> None:
    uninterrupted = torch.load(two_process_runs / "accumulate-1-rank0.pt")["state"]
    resumed = torch.load(two_process_runs / "resumed-rank1.pt")["state"]
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name


@pytest.mark.parametrize("scenario", ["accumulate-2", "resumed"])
def test_a_two_process_run_resumed_by_one_process_goes_on_where_the_two_stopped(
    two_process_runs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, scenario: str
) -> None:
    folder = tmp_path / scenario
    shutil.copytree(two_process_runs / scenario, folder)
    saved = torch.load(folder / "last" / "trainer_state.pt", weights_only=False)
    epoch, batch_index = saved["epoch"], saved["batch_index"]
    assert len(saved["rng_by_rank"]) == 2 and batch_index > 0  # saved mid-epoch by two processes
    taken: list[tuple[int, int]] = []

    class RecordedEpoch(list):
        def __init__(self, epoch: int) -> None:
            super().__init__(ddp_worker.shard_batches(epoch))  # one process: the whole list
            self.epoch = epoch

        def __getitem__(self, index):  # type: ignore[no-untyped-def]
            taken.append((self.epoch, index))
            return super().__getitem__(index)

    grad_accum_steps = ddp_worker.SCENARIOS[scenario][0]
    with caplog.at_level("WARNING", logger="transformer_lab.training.trainer"):
        ddp_worker.train(folder, grad_accum_steps, saved["global_step"] + 1, RecordedEpoch, resume=True)
    # The two shards had taken the epoch list's first 2 * batch_index batches between them:
    # the one process goes on from there (from the next epoch where that was all of it),
    # not from batch_index, which would train half of what they took again.
    position = 2 * batch_index
    epoch_length = len(ddp_worker.shard_batches(epoch))
    expected = (epoch, position) if position < epoch_length else (epoch + 1, 0)
    assert taken[0] == expected and len(taken) == grad_accum_steps
    assert f"continues at batch {position} of its shard" in caplog.text


def test_the_train_command_runs_under_torchrun_and_rank_0_alone_reports(two_process_runs: Path) -> None:
    outputs = [(two_process_runs / f"cli-rank{rank}.txt").read_text() for rank in range(ddp_worker.WORLD_SIZE)]
    assert outputs[0].startswith("exit code 0\n")
    assert "trained 4 steps (2 epochs completed, stopped by max_steps)" in outputs[0]  # the second ends at step 4
    assert "exact match on 40 held-out sequences" in outputs[0]
    assert outputs[1] == "exit code 0\n"
    out = two_process_runs / "cli"
    # 4 batches per epoch shared by 2 ranks: 2 steps per epoch, not 4.
    assert [row["epoch"] for row in rows(out) if row["event"] == "train"] == [0, 0, 1, 1]
    # .lock: rank 0 held the folder for the run (training/run/run_lock.py); the other rank did not.
    assert {path.name for path in out.iterdir()} == {"metrics.jsonl", "last", "best", ".lock"}
    assert (out / ".lock").read_text(encoding="utf-8") == ""  # released at the end


def test_ranks_that_disagree_all_raise_instead_of_hanging(two_process_runs: Path) -> None:
    for rank in range(ddp_worker.WORLD_SIZE):
        batches, files = (two_process_runs / f"checks-rank{rank}.txt").read_text().splitlines()
        assert "got between 5 and 6; this rank (%d) has %d" % (rank, 5 + rank) in batches
        assert "extra_files: expected the same on every rank" in files and "rank(s) [1]" in files


def test_launch_is_read_from_the_torchrun_variables() -> None:
    assert launch_from_environment({}) is None
    assert launch_from_environment({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}) == Launch(3, 1, 4)
    with pytest.raises(ValueError, match="LOCAL_RANK, WORLD_SIZE.*got only RANK"):
        launch_from_environment({"RANK": "0"})
    with pytest.raises(ValueError, match="integer in WORLD_SIZE, got 'two'"):
        launch_from_environment({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "two"})
    with pytest.raises(ValueError, match="RANK=2, LOCAL_RANK=0, WORLD_SIZE=2"):
        launch_from_environment({"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "2"})


def test_a_single_process_leaves_the_loss_and_model_alone() -> None:
    parallel = DataParallel()
    model = torch.nn.Linear(2, 2)
    assert not parallel.active and parallel.is_main
    assert parallel.wrap(model) is model and parallel.unwrap(model) is model
    batch_loss = parallel.reduce_batch_loss(torch.tensor(2.5), 7)
    assert (batch_loss.value, batch_loss.tokens, batch_loss.weight) == (2.5, 7, 1.0)
    assert parallel.run_on_main(lambda: {"val_loss": 1.0}) == {"val_loss": 1.0}
    assert parallel.gather_on_main(3) is None


@pytest.mark.cuda
def test_the_train_command_on_cuda_under_torchrun_with_one_process_ends_as_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One process per GPU is how torchrun is used there; with one, the run is the plain one.
    # fp32 on both sides, so that only the launch differs, not bf16's rounding.
    arguments = [*ddp_worker.CLI_ARGUMENTS, "--set", "train.device=cuda", "--set", "train.precision=fp32"]
    launched = torchrun(
        ["-m", "transformer_lab", *arguments, "--out", str(tmp_path / "torchrun")], cwd=REPOSITORY, processes=1
    )
    assert "max_steps" in launched.stdout and "exact match on 40 held-out sequences" in launched.stdout
    assert main([*arguments, "--out", str(tmp_path / "plain")]) == 0
    assert "exact match on 40 held-out sequences" in capsys.readouterr().out
    assert [row["step"] for row in rows(tmp_path / "torchrun")] == [row["step"] for row in rows(tmp_path / "plain")]
    (launched_model, _, config), (plain_model, _, _) = (
        synthetic_train.load(tmp_path / name / "last") for name in ("torchrun", "plain")
    )
    assert config.train.device.startswith("cuda")
    launched_state, plain_state = (without_key_biases(model.state_dict()) for model in (launched_model, plain_model))
    for name, tensor in plain_state.items():
        # GPU kernels may sum in another order from one run to the next (atomics), hence a tolerance.
        torch.testing.assert_close(launched_state[name], tensor, rtol=1e-4, atol=1e-5, msg=name)


def test_a_process_killed_under_torchrun_leaves_the_others_one_line_and_exit_1(tmp_path: Path) -> None:
    # Two ranks started by hand (torchrun's agent would SIGTERM the survivor at once); rank 1
    # is killed once rank 0 has logged steps, so rank 0 is in the training loop, where its
    # next all-reduce finds the peer gone.
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY / "src"), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    command = [sys.executable, "-m", "transformer_lab", "train", "copy", "--out", str(tmp_path / "run")]
    command += ["--set", "train.epochs=0", "--set", "train.max_steps=100000", "--set", "train.log_every_steps=1"]
    command += ["--set", "train.progress_bar=false", "--set", "data.num_train=256", "--set", "model.d_model=16"]
    command += ["--set", "model.nhead=2", "--set", "model.dim_feedforward=32"]
    ranks = [
        subprocess.Popen(
            command,
            env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for rank in range(2)
    ]
    try:
        log = tmp_path / "run" / "metrics.jsonl"
        deadline = time.monotonic() + 600
        while not (log.exists() and log.read_text(encoding="utf-8").count('"train"') >= 3):
            assert ranks[0].poll() is None and time.monotonic() < deadline, ranks[0].communicate()
            time.sleep(0.2)
        ranks[1].kill()
        _, stderr = ranks[0].communicate(timeout=300)
    finally:
        for process in ranks:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    lines = stderr.strip().splitlines()
    assert ranks[0].returncode == 1, stderr
    assert lines[-1].startswith("transformer-lab train: failed: rank 0 of 2: another process of the run stopped")
    assert "run the same torchrun command with --resume" in lines[-1]
    assert "Traceback" not in stderr


def test_a_rank_waiting_for_its_peers_to_join_ends_at_once_on_sigterm(tmp_path: Path) -> None:
    # Rank 1 alone, its rendezvous store served here with no rank 0 ever coming: as when rank
    # 0 refuses --out (a folder holding a run) and torchrun SIGTERMs the others. Waiting in
    # C++, a Python handler would only run after the process group's 30-minute timeout.
    from datetime import timedelta

    import torch.distributed as dist

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 2, True, timeout=timedelta(seconds=60), wait_for_workers=False)
    keys_before = store.num_keys()
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY / "src"), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    environment.update(RANK="1", LOCAL_RANK="1")
    command = [sys.executable, "-m", "transformer_lab", "train", "copy", "--out", str(tmp_path / "run")]
    command += ["--set", "data.num_train=64", "--set", "train.progress_bar=false"]
    rank = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 600
        while store.num_keys() <= keys_before:  # rank 1 has reached the rendezvous
            assert rank.poll() is None and time.monotonic() < deadline, rank.communicate()
            time.sleep(0.05)
        time.sleep(0.5)
        rank.send_signal(signal.SIGTERM)
        try:
            rank.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("rank 1 ignored SIGTERM while waiting for rank 0 to join")
    finally:
        if rank.poll() is None:
            os.killpg(rank.pid, signal.SIGKILL)
    assert rank.returncode == -signal.SIGTERM
    assert not (tmp_path / "run").exists()  # rank 1 writes nothing


def test_sigterm_to_torchrun_says_the_interruption_once_and_saves_last(tmp_path: Path) -> None:
    # torchrun forwards the signal to every rank; each stops after the same step, and the
    # line saying so is rank 0's alone (was: every rank printed the same line).
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY / "src"), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment["OMP_NUM_THREADS"] = "1"
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        environment.pop(name, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2"]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    command += ["-m", "transformer_lab", "train", "copy", "--out", str(tmp_path / "run")]
    command += ["--set", "train.epochs=0", "--set", "train.max_steps=100000", "--set", "train.log_every_steps=1"]
    command += ["--set", "train.progress_bar=false", "--set", "data.num_train=256", "--set", "model.d_model=16"]
    command += ["--set", "model.nhead=2", "--set", "model.dim_feedforward=32"]
    launched = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        log = tmp_path / "run" / "metrics.jsonl"
        deadline = time.monotonic() + 600
        while not (log.exists() and log.read_text(encoding="utf-8").count('"train"') >= 3):
            assert launched.poll() is None and time.monotonic() < deadline, launched.communicate()
            time.sleep(0.2)
        launched.send_signal(signal.SIGTERM)
        stdout, stderr = launched.communicate(timeout=300)
    finally:
        if launched.poll() is None:
            os.killpg(launched.pid, signal.SIGKILL)
    said = [line for line in (stdout + stderr).splitlines() if "interrupted by SIGTERM" in line]
    assert len(said) == 1, stdout + stderr
    assert said[0].startswith("transformer-lab train: interrupted by SIGTERM at step ")
    assert (tmp_path / "run" / "last" / "trainer_state.pt").is_file()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--set", "data.num_train=abc"], "error: data.num_train: expected an int, got 'abc'"),
        (["--nonsense"], "error: unrecognized arguments: --nonsense (see transformer-lab train --help)"),
    ],
)
def test_a_bad_input_found_before_the_processes_join_is_said_by_the_first_alone_and_every_one_exits_2(
    tmp_path: Path, arguments: list[str], said: str
) -> None:
    # Each process checks the same command line and files: the machine's first (rank 0) says it for
    # them all (was: once per process); each still exits 2. The two are started by hand, not by
    # torchrun, whose agent would stop the second once the first failed: here each fails on its own.
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY / "src"), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    command = [sys.executable, "-m", "transformer_lab", "train", "copy", *arguments, "--out", str(tmp_path / "run")]
    for rank in range(2):
        ended = subprocess.run(
            command,
            env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ended.returncode == 2, ended.stderr
        assert ended.stderr == (f"transformer-lab train: {said}\n" if rank == 0 else "")
    assert not (tmp_path / "run").exists()


def test_a_missing_training_file_under_torchrun_is_said_once(tmp_path: Path) -> None:
    # Rank 0 prepares the corpus and refuses the file; rank 1, waiting for it, is stopped by the
    # agent (was: its "stopped by SIGTERM" beside rank 0's line, or the same line again).
    launched = torchrun(
        ["-m", "transformer_lab", "train", "translation", "--train", "nope.de", "nope.en", "--out", "run"],
        cwd=tmp_path,
        check=False,
    )
    assert launched.returncode != 0
    said = [line for line in (launched.stdout + launched.stderr).splitlines() if line.startswith("transformer-lab")]
    assert said == ["transformer-lab train: error: expected an existing text file, got 'nope.de', which does not exist"]
    assert not (tmp_path / "run").exists()


def test_a_launch_environment_torchrun_would_not_set_is_refused_in_one_line_by_train_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # RANK alone (a cluster's variable, a leftover export): was a traceback from every command,
    # `config` included, read before the commands' error handling.
    for name in ("LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")
    assert main(["config", "copy"]) == 0
    assert capsys.readouterr().out.startswith("# transformer-lab train copy")
    assert main(["train", "copy", "--out", str(tmp_path / "run"), "--set", "train.max_steps=1"]) == 2
    said = capsys.readouterr().err
    assert said == (
        "transformer-lab train: error: environment: expected all of RANK, LOCAL_RANK, WORLD_SIZE "
        "(as torchrun sets them) or none, got only RANK\n"
    )
