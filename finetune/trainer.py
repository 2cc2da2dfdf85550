"""One training loop for every fine-tuning path (evaluators and chatbots), built on accelerate.

The same code runs on CPU, one GPU and several GPUs / nodes (``accelerate launch --config_file
finetune/accelerate/<cpu|gpu|multi_gpu>.yaml …``). A training job supplies the model (its trainable
parameters are trained, e.g. a LoRA adapter), a dataset (anything with ``len`` and ``[i]``), a
collate function ``collate_fn(list_of_examples) -> batch`` and a loss function
``loss_fn(model, batch) -> scalar tensor`` (the mean loss of the micro-batch); :func:`train` does the
rest.

Data order
    Epoch ``e`` visits the examples in a permutation that depends only on ``(seed, e)``
    (``numpy.random.default_rng([seed, e])``; ``shuffle=False`` keeps the dataset order). The
    permutation is cut into global micro-batches of ``batch_size × num_processes`` examples; process
    ``r`` takes the ``r``-th slice of ``batch_size``. With several processes the last, short global
    micro-batch of an epoch is filled up with the first examples of the permutation so that every
    process gets a full batch (accelerate's ``even_batches``); with one process it stays short.
    ``group_by_length=True`` (with per-example ``lengths``) sorts each run of
    ``50 × batch_size × num_processes`` examples of the permutation by length, cuts it into global
    micro-batches and shuffles those (seeded by ``(seed, e)``; a short last batch stays last), so a
    batch holds examples of similar length and pads little — the transformers ``group_by_length``
    idea, up to 2× faster for short, variable-length texts on CPU. (:mod:`finetune.data.order`)

Optimizer steps
    ``grad_accum`` consecutive micro-batches form one optimizer step; the last window of an epoch
    may be shorter (a *partial* window: its gradient is the mean over the micro-batches it has).
    Windows never cross epochs, so step ``s`` always covers the same examples:
    ``epoch = s // steps_per_epoch`` and its micro-batches start at
    ``(s % steps_per_epoch) × grad_accum``. The loss of a step is the mean micro-batch loss of its
    window (averaged over processes); ``TrainResult.losses`` holds one per optimizer step.
    The learning rate is a pure function of the step (linear warm-up, then linear / cosine decay or
    constant), gradients are clipped to ``max_grad_norm``.

Precision
    ``mixed_precision="auto"`` is the launch config's value when launched by ``accelerate launch``
    (``ACCELERATE_MIXED_PRECISION``), else bf16 on a GPU that supports it, else fp32.

Checkpoints and resume
    Every ``checkpoint_every`` optimizer steps and after the last step, ``accelerator.save_state``
    writes ``<output_dir>/checkpoints/step-<N>/`` (optimizer, RNG states of every process, and only
    the *trainable* parameters of the model, so a LoRA checkpoint is megabytes, not the base model),
    then ``trainer_state.json`` (step, losses, the data-order settings), which marks the checkpoint
    complete. The newest ``keep_checkpoints`` are kept. With ``resume=True`` (default) a run starts
    from the newest complete checkpoint and skips the steps already done; because data order, learning
    rate and RNG states are functions of the step, a resumed run gives exactly the losses and weights
    of an uninterrupted one. ``resume=False`` deletes old checkpoints and starts over. Resuming with a
    different dataset size, batch size, ``grad_accum``, seed, shuffle or number of processes is an
    error (the steps would not mean the same examples).
    Under DeepSpeed / FSDP accelerate saves its own (full) model state; those paths are not tested.

Logging
    A rich progress bar on the main process and one JSON line per ``log_every`` steps (and the last
    step) in ``train_log.jsonl``: ``step``, ``epoch``, ``loss`` (mean since the previous line),
    ``step_loss``, ``lr``, ``grad_norm``, ``samples``, ``time``. On resume, lines after the
    checkpoint's step are dropped, so the log reads like one uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from finetune.data.order import epoch_permutation, shard_batches

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"
LOG_FILE = "train_log.jsonl"

log = logging.getLogger(__name__)


class TrainSettings(BaseModel):
    """Optimisation settings shared by every job (the ``train:`` block of a finetune config)."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    learning_rate: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    batch_size: int = Field(16, ge=1)  # per device, per micro-batch
    grad_accum: int = Field(1, ge=1)
    epochs: float = Field(1.0, gt=0)
    max_steps: int | None = Field(None, ge=1)  # optimizer steps; overrides epochs
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    lr_schedule: Literal["linear", "cosine", "constant"] = "linear"
    max_grad_norm: float | None = 1.0
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = "auto"
    checkpoint_every: int = Field(200, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    log_every: int = Field(10, ge=1)
    resume: bool = True
    shuffle: bool = True
    group_by_length: bool = False  # needs train(..., lengths=...); see "Data order"
    num_workers: int = Field(0, ge=0)  # DataLoader workers for collate_fn


@dataclass
class TrainResult:
    output_dir: Path
    steps: int
    epochs_done: float
    samples: int  # examples processed by this call (all processes; not counting resumed steps)
    wall_seconds: float
    train_seconds: float
    losses: list[float] = field(default_factory=list)  # one per optimizer step, from step 1
    resumed_from: int | None = None
    mixed_precision: str = "no"
    num_processes: int = 1
    total_steps: int = 0
    steps_per_epoch: int = 0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.train_seconds if self.train_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "total_steps": self.total_steps,
            "steps_per_epoch": self.steps_per_epoch,
            "epochs_done": round(self.epochs_done, 4),
            "samples": self.samples,
            "wall_seconds": round(self.wall_seconds, 3),
            "train_seconds": round(self.train_seconds, 3),
            "samples_per_second": round(self.samples_per_second, 3),
            "first_loss": self.losses[0] if self.losses else None,
            "last_loss": self.losses[-1] if self.losses else None,
            "resumed_from": self.resumed_from,
            "mixed_precision": self.mixed_precision,
            "num_processes": self.num_processes,
        }


def resolve_mixed_precision(setting: str) -> str:
    """``auto`` → the ``accelerate launch`` config's value if there is one, else bf16 on a GPU that
    supports it, else no (CPU autocast to bf16 is slower here)."""
    if setting != "auto":
        return setting
    env = os.environ.get("ACCELERATE_MIXED_PRECISION")
    if env:
        return env.lower()
    import torch

    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint (one with ``trainer_state.json``) under ``output_dir``."""
    root = Path(output_dir) / CHECKPOINTS
    if not root.is_dir():
        return None
    done = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file() and _step_of(p) is not None]
    return max(done, key=lambda p: _step_of(p) or 0, default=None)


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Learning-rate multiplier for optimizer step ``step`` (0-based) of ``total``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return max(0.0, 1.0 - progress)


def train(
    model: Any,
    dataset: Sequence[Any],
    collate_fn: Callable[[list[Any]], Any],
    loss_fn: Callable[[Any, Any], Any],
    settings: TrainSettings,
    output_dir: str | Path,
    *,
    progress: bool = True,
    description: str = "training",
    on_step: Callable[[int, float], None] | None = None,
    lengths: Sequence[int] | None = None,
) -> TrainResult:
    """Train the trainable parameters of ``model`` on ``dataset``; see the module docstring.

    ``on_step(step, loss)`` is called after every optimizer step (after that step's checkpoint, so
    an exception raised there leaves a resumable run). ``lengths`` (one per example, e.g. token
    counts) is needed by ``settings.group_by_length``. The caller's ``model`` object holds the
    trained weights when this returns (and the checkpoint's weights when a finished run is resumed).
    """
    import torch
    from accelerate.utils import send_to_device, set_seed
    from torch.utils.data import DataLoader

    t_start = time.perf_counter()
    n = len(dataset)
    if n == 0:
        raise ValueError("the training set is empty")
    if settings.group_by_length and lengths is None:
        raise ValueError("group_by_length=True needs the examples' lengths (train(..., lengths=...))")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters (is the LoRA adapter attached?)")
    out = Path(output_dir)
    mp = resolve_mixed_precision(settings.mixed_precision)
    acc = _make_accelerator(mp)
    nproc, rank = acc.num_processes, acc.process_index
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world > 1 and nproc == 1:  # every rank would train alone and race on output_dir
        raise RuntimeError(
            f"launched as {world} processes (WORLD_SIZE) but accelerate runs a single one; on CPU-only "
            "machines set ACCELERATE_USE_CPU=true (or use a MULTI_CPU accelerate config)"
        )
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
    set_seed(settings.seed)

    micro_per_epoch = math.ceil(n / (settings.batch_size * nproc))
    per_epoch = math.ceil(micro_per_epoch / settings.grad_accum)
    total = settings.max_steps or max(1, math.ceil(per_epoch * settings.epochs))
    warmup = int(total * settings.warmup_ratio)
    data_key = {
        "examples": n,
        "batch_size": settings.batch_size,
        "grad_accum": settings.grad_accum,
        "num_processes": nproc,
        "seed": settings.seed,
        "shuffle": settings.shuffle,
    }
    data_key["group_by_length"] = settings.group_by_length

    opt = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    model, opt = acc.prepare(model, opt)
    hooks = _register_trainable_state_hooks(acc)

    step, resumed_from, losses = 0, None, []
    ckpt = latest_checkpoint(out) if settings.resume else None
    if ckpt is not None:
        state = json.loads((ckpt / STATE_FILE).read_text("utf-8"))
        _check_resumable(ckpt, state.get("data", {}), data_key)
        acc.load_state(str(ckpt))
        step = resumed_from = int(state["step"])
        losses = [float(x) for x in state["losses"]][:step]
        log.info("resuming from %s (step %d of %d)", ckpt, step, total)
    acc.wait_for_everyone()
    if acc.is_main_process:
        if ckpt is None and (out / CHECKPOINTS).exists():
            shutil.rmtree(out / CHECKPOINTS)  # a fresh run: old checkpoints must not be resumed later
        _trim_log(out / LOG_FILE, step)
    acc.wait_for_everyone()

    def micro_batches(first_step: int) -> Iterator[tuple[int, Any, int]]:
        """(epoch, batch, new_samples) from the first micro-batch of ``first_step`` on."""
        epoch, window = divmod(first_step, per_epoch)
        skip = window * settings.grad_accum
        while True:
            order = epoch_permutation(
                n,
                settings.seed,
                epoch,
                settings.shuffle,
                lengths if settings.group_by_length else None,
                settings.batch_size * nproc,
            )
            shards = shard_batches(order, settings.batch_size, nproc, rank)[skip:]
            loader: DataLoader[Any] = DataLoader(
                # any sequence works (the batch sampler only indexes it); torch's stubs ask for a Dataset
                dataset,  # type: ignore[arg-type]
                batch_sampler=[idx for idx, _ in shards],
                collate_fn=collate_fn,
                num_workers=settings.num_workers,
                # its own generator: a DataLoader iterator draws a seed from the global RNG otherwise,
                # and a resumed run creates one where the uninterrupted run did not
                generator=torch.Generator().manual_seed(settings.seed * 100_003 + epoch),
            )
            for (_, real), batch in zip(shards, loader, strict=True):
                yield epoch, batch, real
            epoch, skip = epoch + 1, 0

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        disable=not (progress and acc.is_main_process),
    )
    samples, t_train, since_log = 0, 0.0, []
    logf = (out / LOG_FILE).open("a", encoding="utf-8") if acc.is_main_process else None
    model.train()
    try:
        with bar:
            task = bar.add_task(
                description, total=total, completed=step, loss=f"{losses[-1]:.4f}" if losses else "—"
            )
            stream = micro_batches(step) if step < total else iter(())
            while step < total:
                t0 = time.perf_counter()
                window_len = min(
                    settings.grad_accum, micro_per_epoch - (step % per_epoch) * settings.grad_accum
                )
                lr = settings.learning_rate * lr_factor(step, total, warmup, settings.lr_schedule)
                for group in opt.param_groups:
                    group["lr"] = lr
                loss_sum = torch.zeros((), device=acc.device)
                for i in range(window_len):
                    epoch, batch, real = next(stream)
                    batch = send_to_device(batch, acc.device)
                    sync = i == window_len - 1
                    with acc.no_sync(model) if not sync else contextlib.nullcontext():
                        loss = loss_fn(model, batch)
                        acc.backward(loss / window_len)
                    loss_sum += loss.detach().float()
                    samples += real
                grad_norm = None
                if settings.max_grad_norm:
                    grad_norm = acc.clip_grad_norm_(params, settings.max_grad_norm)
                opt.step()
                opt.zero_grad(set_to_none=True)
                step_loss = (
                    float(acc.reduce(loss_sum / window_len, "mean"))
                    if nproc > 1
                    else float(loss_sum / window_len)
                )
                t_train += time.perf_counter() - t0
                step += 1
                losses.append(step_loss)
                since_log.append(step_loss)
                bar.update(task, completed=step, loss=f"{step_loss:.4f}")
                if logf is not None and (step % settings.log_every == 0 or step == total):
                    logf.write(
                        json.dumps(
                            {
                                "step": step,
                                "epoch": round(step / per_epoch, 4),
                                "loss": sum(since_log) / len(since_log),
                                "step_loss": step_loss,
                                "lr": lr,
                                "grad_norm": float(grad_norm) if grad_norm is not None else None,
                                "samples": samples,
                                "time": round(time.perf_counter() - t_start, 3),
                            }
                        )
                        + "\n"
                    )
                    logf.flush()
                    since_log = []
                if step % settings.checkpoint_every == 0 or step == total:
                    _save_checkpoint(acc, out, step, losses, data_key, settings.keep_checkpoints)
                if on_step is not None:
                    on_step(step, step_loss)
    finally:
        if logf is not None:
            logf.close()
        for h in hooks:
            h.remove()
        acc.unwrap_model(model, keep_fp32_wrapper=False)  # undo the autocast patch of forward
    acc.wait_for_everyone()
    return TrainResult(
        output_dir=out,
        steps=step,
        epochs_done=step / per_epoch,
        samples=samples,
        wall_seconds=time.perf_counter() - t_start,
        train_seconds=t_train,
        losses=losses,
        resumed_from=resumed_from,
        mixed_precision=mp,
        num_processes=nproc,
        total_steps=total,
        steps_per_epoch=per_epoch,
    )


def _step_of(path: Path) -> int | None:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return None


def _make_accelerator(mp: str) -> Any:
    """An Accelerator with mixed precision ``mp``. In a plain (not launched) process whose earlier
    Accelerator used another precision, the process-wide accelerate state is reset first."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState

    state = AcceleratorState._shared_state
    if state and state.get("_mixed_precision") not in (None, mp) and PartialState().num_processes == 1:
        AcceleratorState._reset_state()
    return Accelerator(mixed_precision=mp)


def _weights_name(acc: Any, model: Any) -> str:
    i = next(i for i, m in enumerate(acc._models) if m is model)
    return "model.safetensors" if i == 0 else f"model_{i}.safetensors"


def _register_trainable_state_hooks(acc: Any) -> list[Any]:
    """Checkpoint only the trainable parameters (LoRA) of the prepared model(s) (DDP / single device;
    DeepSpeed and FSDP save their own state)."""
    from accelerate.utils import DistributedType

    if acc.distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP, DistributedType.MEGATRON_LM):
        return []

    def save_hook(models: list[Any], weights: list[dict], output_dir: str) -> None:
        for i, m in enumerate(models):
            inner = acc.unwrap_model(m)
            weights[i] = {k: p.detach().contiguous() for k, p in inner.named_parameters() if p.requires_grad}

    def load_hook(models: list[Any], input_dir: str) -> None:
        from safetensors.torch import load_file

        for m in list(models):
            inner = acc.unwrap_model(m)
            path = Path(input_dir) / _weights_name(acc, m)
            sd = load_file(str(path))
            trainable = {k for k, p in inner.named_parameters() if p.requires_grad}
            if set(sd) != trainable:
                raise ValueError(
                    f"checkpoint {path} does not match the model's trainable parameters: "
                    f"missing {sorted(trainable - set(sd))[:5]}, unexpected {sorted(set(sd) - trainable)[:5]}"
                )
            inner.load_state_dict(sd, strict=False)
        models.clear()  # loaded here; accelerate must not load a full state dict

    return [acc.register_save_state_pre_hook(save_hook), acc.register_load_state_pre_hook(load_hook)]


def _check_resumable(ckpt: Path, saved: dict[str, Any], now: dict[str, Any]) -> None:
    # checkpoints written before an option existed hold its default
    was = {"group_by_length": False, **saved}
    diff = {k: (was.get(k), v) for k, v in now.items() if was.get(k) != v}
    if diff:
        what = ", ".join(f"{k}: checkpoint {a!r} vs now {b!r}" for k, (a, b) in diff.items())
        raise ValueError(
            f"cannot resume from {ckpt}: the data order would differ ({what}); "
            "use the same data and settings, another output_dir, or resume=False to start over"
        )


def _trim_log(path: Path, step: int) -> None:
    """Drop log lines written after ``step`` (by an interrupted run) — or all lines when step is 0."""
    if not path.exists():
        return
    keep = []
    if step:
        for line in path.read_text("utf-8").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue
    path.write_text("".join(x + "\n" for x in keep), "utf-8")


def _save_checkpoint(
    acc: Any, out: Path, step: int, losses: list[float], data_key: dict[str, Any], keep: int
) -> None:
    path = out / CHECKPOINTS / f"step-{step}"
    acc.wait_for_everyone()
    acc.save_state(str(path))
    acc.wait_for_everyone()
    if acc.is_main_process:
        state = {"step": step, "losses": losses, "data": data_key}
        tmp = path / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state), "utf-8")
        tmp.replace(path / STATE_FILE)  # the checkpoint is complete once this file exists
        done = sorted(
            (p for p in (out / CHECKPOINTS).glob("step-*") if _step_of(p) is not None),
            key=lambda p: _step_of(p) or 0,
        )
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()
