"""finetune.trainer: data order, gradient accumulation, checkpoints and exact resume, errors."""

from __future__ import annotations

import json

import pytest
import torch

from finetune.data.order import epoch_permutation, shard_batches
from finetune.trainer import (
    CHECKPOINTS,
    LOG_FILE,
    STATE_FILE,
    TrainSettings,
    latest_checkpoint,
    lr_factor,
    train,
)

# -- a toy regression model (fast; dropout makes the RNG state matter) ---------------------------------


class Toy(torch.nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.frozen = torch.nn.Linear(4, 8)
        self.frozen.requires_grad_(False)
        self.head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(8, 1))

    def forward(self, x):
        return self.head(torch.tanh(self.frozen(x))).squeeze(-1)


def toy_data(n: int = 10) -> list[dict]:
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(n, 4, generator=g)
    return [{"i": i, "x": xs[i], "y": float(xs[i].sum())} for i in range(n)]


def collate(rows):
    return {
        "i": torch.tensor([r["i"] for r in rows]),
        "x": torch.stack([r["x"] for r in rows]),
        "y": torch.tensor([r["y"] for r in rows]),
    }


def mse(model, batch):
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


def settings(**kw) -> TrainSettings:
    base = dict(batch_size=3, learning_rate=0.05, checkpoint_every=1000, log_every=1, mixed_precision="no")
    return TrainSettings(**{**base, **kw})


class Stop(Exception):
    pass


def stop_after(n):
    def on_step(step, loss):
        if step == n:
            raise Stop

    return on_step


def trainable(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}


# -- unit pieces ---------------------------------------------------------------------------------------
def test_epoch_order_depends_only_on_seed_and_epoch():
    a = epoch_permutation(20, seed=3, epoch=1)
    assert a == epoch_permutation(20, seed=3, epoch=1) and sorted(a) == list(range(20))
    assert a != epoch_permutation(20, seed=3, epoch=2) and a != epoch_permutation(20, seed=4, epoch=1)
    assert epoch_permutation(5, 0, 0, shuffle=False) == [0, 1, 2, 3, 4]


def test_length_grouped_order_is_a_seeded_permutation_of_similar_length_batches():
    import random

    lengths = [random.Random(i).randint(1, 200) for i in range(1000)]
    a = epoch_permutation(1000, 3, 1, lengths=lengths, batch=8)
    assert a == epoch_permutation(1000, 3, 1, lengths=lengths, batch=8) and sorted(a) == list(range(1000))
    assert a != epoch_permutation(1000, 3, 2, lengths=lengths, batch=8)

    def padding(order):  # padded tokens over all batches of 8
        return sum(
            max(lengths[i] for i in order[s : s + 8]) * len(order[s : s + 8])
            - sum(lengths[i] for i in order[s : s + 8])
            for s in range(0, len(order), 8)
        )

    plain = epoch_permutation(1000, 3, 1)
    assert padding(a) < 0.2 * padding(plain)  # batches hold similar lengths
    first = [lengths[i] for i in a[:8]]
    assert first == sorted(first, reverse=True)  # a batch is a slice of one length-sorted run
    assert a[:400] != sorted(a[:400], key=lambda i: -lengths[i])  # ... but batches are shuffled
    # a short last batch (1003 = 125 × 8 + 3) stays last, so batches stay aligned
    long = lengths + [5, 6, 7]
    b = epoch_permutation(1003, 0, 0, lengths=long, batch=8)
    last_run = sorted(epoch_permutation(1003, 0, 0)[800:], key=lambda j: (-long[j], j))
    assert sorted(b) == list(range(1003)) and b[-3:] == last_run[-3:]
    assert epoch_permutation(5, 0, 0, shuffle=False, lengths=[1] * 5, batch=2) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="lengths"):
        epoch_permutation(5, 0, 0, lengths=[1, 2], batch=2)


def test_shard_batches_even_batches_for_several_processes():
    order = list(range(7))
    assert shard_batches(order, 3, 1, 0) == [([0, 1, 2], 3), ([3, 4, 5], 3), ([6], 1)]
    r0, r1 = shard_batches(order, 2, 2, 0), shard_batches(order, 2, 2, 1)
    assert [b for b, _ in r0] == [[0, 1], [4, 5]] and [b for b, _ in r1] == [[2, 3], [6, 0]]
    assert [n for _, n in r0] == [4, 3]  # distinct examples per global micro-batch


def test_lr_schedules():
    assert [lr_factor(s, 4, 2, "linear") for s in range(4)] == [0.5, 1.0, 1.0, 0.5]
    assert lr_factor(3, 4, 0, "constant") == 1.0
    assert lr_factor(0, 10, 0, "cosine") == 1.0 and lr_factor(5, 10, 0, "cosine") == pytest.approx(0.5)


# -- errors --------------------------------------------------------------------------------------------
def test_empty_dataset_and_no_trainable_params_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        train(Toy(), [], collate, mse, settings(), tmp_path / "a", progress=False)
    frozen = Toy().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        train(frozen, toy_data(), collate, mse, settings(), tmp_path / "b", progress=False)


# -- accumulation, epochs, logs ------------------------------------------------------------------------
def test_grad_accum_equals_a_bigger_batch(tmp_path):
    data = toy_data(16)
    a, b = Toy(), Toy()
    ra = train(a, data, collate, mse, settings(batch_size=8, epochs=3), tmp_path / "a", progress=False)
    rb = train(
        b, data, collate, mse, settings(batch_size=4, grad_accum=2, epochs=3), tmp_path / "b", progress=False
    )
    assert ra.steps == rb.steps == 6
    torch.testing.assert_close(ra.losses, rb.losses)
    torch.testing.assert_close(trainable(a), trainable(b))


def test_partial_windows_epochs_and_log(tmp_path):
    seen = []

    def loss(model, batch):
        seen.append(batch["i"].tolist())
        return mse(model, batch)

    # 10 examples, batches of 3 → 4 micro-batches (3,3,3,1) per epoch → 2 steps per epoch (the 2nd
    # window holds the last full batch and the short one); 2.5 epochs → 5 steps.
    r = train(
        Toy(), toy_data(10), collate, loss, settings(grad_accum=2, epochs=2.5), tmp_path, progress=False
    )
    assert (r.steps, r.total_steps, r.steps_per_epoch, r.samples) == (5, 5, 2, 26)
    assert r.epochs_done == 2.5 and len(r.losses) == 5
    for e in range(2):
        assert sum(seen[4 * e : 4 * e + 4], []) == epoch_permutation(10, 0, e)
    assert sum(seen[8:], []) == epoch_permutation(10, 0, 2)[:6]
    lines = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4, 5] and lines[-1]["epoch"] == 2.5
    assert [x["step_loss"] for x in lines] == r.losses and lines[-1]["samples"] == 26


@pytest.mark.parametrize("grad_accum,stop", [(2, 3), (1, 4)])
def test_resume_equals_uninterrupted_toy(tmp_path, grad_accum, stop):
    """Stops mid-epoch (and, for grad_accum=1, right at an epoch's end) and resumes across epochs."""
    s = settings(grad_accum=grad_accum, epochs=3, checkpoint_every=1 if grad_accum == 1 else 3)
    data = toy_data(10)
    ref_model = Toy(dropout=0.3)
    ref = train(ref_model, data, collate, mse, s, tmp_path / "ref", progress=False)
    with pytest.raises(Stop):
        train(
            Toy(dropout=0.3),
            data,
            collate,
            mse,
            s,
            tmp_path / "run",
            progress=False,
            on_step=stop_after(stop),
        )
    resumed_model = Toy(dropout=0.3)
    got = train(resumed_model, data, collate, mse, s, tmp_path / "run", progress=False)
    assert got.resumed_from == (3 if grad_accum == 2 else 4) and got.steps == ref.steps
    torch.testing.assert_close(got.losses, ref.losses, rtol=0, atol=0)
    torch.testing.assert_close(trainable(resumed_model), trainable(ref_model), rtol=0, atol=0)
    steps = [json.loads(x)["step"] for x in (tmp_path / "run" / LOG_FILE).read_text().splitlines()]
    assert steps == list(range(1, ref.steps + 1))  # lines of the interrupted run after its checkpoint dropped


def test_group_by_length_trains_in_grouped_order_and_resumes_exactly(tmp_path):
    data = toy_data(20)
    lengths = [(7 * i) % 11 for i in range(20)]
    seen = []

    def loss(model, batch):
        seen.append(batch["i"].tolist())
        return mse(model, batch)

    s = settings(group_by_length=True, epochs=2, checkpoint_every=2)
    with pytest.raises(ValueError, match="lengths"):
        train(Toy(), data, collate, mse, s, tmp_path / "x", progress=False)
    ref_model = Toy(dropout=0.3)
    ref = train(ref_model, data, collate, loss, s, tmp_path / "ref", progress=False, lengths=lengths)
    assert sum(seen[:7], []) == epoch_permutation(20, 0, 0, lengths=lengths, batch=3)
    with pytest.raises(Stop):
        train(
            Toy(dropout=0.3),
            data,
            collate,
            mse,
            s,
            tmp_path / "run",
            progress=False,
            lengths=lengths,
            on_step=stop_after(9),
        )
    with pytest.raises(ValueError, match="group_by_length"):  # another data order: refused
        train(
            Toy(dropout=0.3),
            data,
            collate,
            mse,
            settings(epochs=2, checkpoint_every=2),
            tmp_path / "run",
            progress=False,
        )
    resumed_model = Toy(dropout=0.3)
    got = train(resumed_model, data, collate, mse, s, tmp_path / "run", progress=False, lengths=lengths)
    assert got.resumed_from == 8
    torch.testing.assert_close(got.losses, ref.losses, rtol=0, atol=0)
    torch.testing.assert_close(trainable(resumed_model), trainable(ref_model), rtol=0, atol=0)


def test_checkpoints_keep_resume_finished_and_mismatch(tmp_path):
    data = toy_data(10)
    s = settings(max_steps=6, checkpoint_every=2, keep_checkpoints=2)
    m = Toy()
    r = train(m, data, collate, mse, s, tmp_path, progress=False)
    ckpts = sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir())
    assert ckpts == ["step-4", "step-6"] and latest_checkpoint(tmp_path).name == "step-6"
    state = json.loads((tmp_path / CHECKPOINTS / "step-6" / STATE_FILE).read_text())
    assert state["step"] == 6 and state["losses"] == r.losses
    from safetensors.torch import load_file

    assert set(load_file(str(tmp_path / CHECKPOINTS / "step-6" / "model.safetensors"))) == {
        "head.1.weight",
        "head.1.bias",
    }  # only the trainable parameters
    # a finished run resumes to its end at once and loads the final weights
    again = Toy()
    r2 = train(again, data, collate, mse, s, tmp_path, progress=False)
    assert r2.resumed_from == 6 and r2.samples == 0 and r2.losses == r.losses
    torch.testing.assert_close(trainable(again), trainable(m), rtol=0, atol=0)
    with pytest.raises(ValueError, match="batch_size"):
        train(Toy(), data, collate, mse, settings(max_steps=6, batch_size=4), tmp_path, progress=False)
    # resume=False starts over and removes the old checkpoints
    r3 = train(Toy(), data, collate, mse, settings(max_steps=2, resume=False), tmp_path, progress=False)
    assert r3.resumed_from is None and sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir()) == [
        "step-2"
    ]


# -- LoRA on a tiny llama: resume gives exactly the uninterrupted weights ------------------------------
def test_lora_resume_equals_uninterrupted(tmp_path, tiny_llama):
    from finetune.generative import (
        GenerativeExample,
        PromptEncoder,
        encode_examples,
        make_answer_loss,
        make_left_pad_collate,
    )
    from finetune.lora import LoraSettings, load_lora_model

    enc = PromptEncoder(str(tiny_llama))
    ex = [
        GenerativeExample(f"is {w} number {i} good?", "Yes" if w == "this" else "No")
        for i in range(5)
        for w in ("this", "that")
    ]
    rows, _ = encode_examples(ex, enc, 256)
    collate_fn = make_left_pad_collate(enc.tokenizer.pad_token_id)
    s = settings(batch_size=3, grad_accum=2, max_steps=6, checkpoint_every=3, learning_rate=1e-3)
    lora = LoraSettings(r=4, dropout=0.1)

    def run(out, **kw):
        model = load_lora_model(str(tiny_llama), lora, seed=0)
        res = train(model, rows, collate_fn, make_answer_loss(model), s, out, progress=False, **kw)
        return model, res

    ref_model, ref = run(tmp_path / "ref")
    with pytest.raises(Stop):
        run(tmp_path / "run", on_step=stop_after(3))
    assert latest_checkpoint(tmp_path / "run").name == "step-3"
    model, got = run(tmp_path / "run")
    assert got.resumed_from == 3 and got.steps == 6 and len(got.losses) == 6
    torch.testing.assert_close(got.losses, ref.losses, rtol=0, atol=0)
    lora_w = trainable(model)
    assert lora_w and all("lora_" in k for k in lora_w)
    torch.testing.assert_close(lora_w, trainable(ref_model), rtol=0, atol=0)


# -- two processes (DDP over gloo on CPU): sharding, no_sync windows, loss reduce, resume -----------------
DDP_SCRIPT = r"""
import json, sys
import torch
from accelerate import PartialState
from finetune.trainer import TrainSettings, train

state = PartialState(cpu=True)
out = sys.argv[1]


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.frozen = torch.nn.Linear(4, 8).requires_grad_(False)
        self.head = torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))

    def forward(self, x):
        return self.head(torch.tanh(self.frozen(x))).squeeze(-1)


g = torch.Generator().manual_seed(1)
xs = torch.randn(11, 4, generator=g)
data = [{"x": xs[i], "y": float(xs[i].sum())} for i in range(11)]
collate = lambda rows: {"x": torch.stack([r["x"] for r in rows]), "y": torch.tensor([r["y"] for r in rows])}
mse = lambda m, b: torch.nn.functional.mse_loss(m(b["x"]), b["y"])
s = TrainSettings(batch_size=2, grad_accum=2, epochs=2, checkpoint_every=1, learning_rate=0.05, mixed_precision="no")


class Stop(Exception):
    pass


def stop(step, loss):
    if step == 3:
        raise Stop


ref_model = Toy()
ref = train(ref_model, data, collate, mse, s, out + "/ref", progress=False)
try:
    train(Toy(), data, collate, mse, s, out + "/run", progress=False, on_step=stop)
except Stop:
    pass
model = Toy()
got = train(model, data, collate, mse, s, out + "/run", progress=False)
same = all(torch.equal(a, b) for a, b in zip(model.parameters(), ref_model.parameters()))
head = [p.detach().flatten().tolist() for p in model.head.parameters()]
open(f"{out}/result_{state.process_index}.json", "w").write(json.dumps({"rank": state.process_index, "n": ref.num_processes, "steps": ref.steps,
      "samples": ref.samples, "resumed_from": got.resumed_from, "losses_equal": got.losses == ref.losses,
      "losses": ref.losses, "weights_equal": same, "head": head}))
"""


def test_two_process_ddp_resume_equals_uninterrupted(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "ddp_run.py"
    script.write_text(DDP_SCRIPT)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(script),
        str(tmp_path / "out"),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = [json.loads((tmp_path / "out" / f"result_{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["rank"] for r in res] == [0, 1] and all(r["n"] == 2 for r in res)
    # 11 examples, global micro-batch 4 → 3 micro-batches (4, 4, 3 + 1 filled) → 2 steps/epoch; 2 epochs
    assert all(r["steps"] == 4 and r["samples"] == 22 and r["resumed_from"] == 3 for r in res)
    assert all(r["losses_equal"] and r["weights_equal"] for r in res)
    assert res[0]["losses"] == res[1]["losses"] and res[0]["head"] == res[1]["head"]  # replicas agree
