"""Training data of the generative (P(Yes)) evaluator: example type, prompt builders, tokenization
and the loading of ``DATA`` for ``harness finetune generative CONFIG DATA OUT``.

``DATA`` is one of

* a JSONL file, one ``{"prompt", "answer"[, "system"][, "label"]}`` object per line (training only);
* a registered training-data version (:mod:`finetune.data`): ``NAME@X.Y.Z`` or ``NAME`` (latest)
  in the dataset registry, or the version's directory — whatever
  :func:`~finetune.data.load_training_data` accepts. The model trains on config ``train``; when the
  set records a ``test`` config (e.g. a :func:`~finetune.data.split_by_dialogue` split) it is
  evaluated on that after training.

Registered :class:`~finetune.data.Example` sets (self-supervised relevance / coherence pairs, human
labels) are converted to xDial-Eval Table 3 instruction examples by :func:`example_to_generative`:
the prompt is the one the ``xdial-eval-turn`` / ``xdial-eval-dialogue`` task sends the judge, the
answer is the positive label word (``Yes``) for ``label >= 0.5`` and the negative one (``No``)
otherwise; the label is kept for the held-out metrics. :class:`~finetune.data.InstructionExample`
sets (e.g. MEDAL distillation: Table 11 prompt -> verdict JSON) train on their system + prompt ->
target as they are.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The harness tasks whose (Table 3) prompts converted examples get, by example level.
PROMPT_TASKS: dict[str, str] = {"turn": "xdial-eval-turn", "dialogue": "xdial-eval-dialogue"}
ANSWER_THRESHOLD = 0.5  # label >= threshold -> the positive label word
TRAIN_SPLIT, EVAL_SPLIT = "train", "test"


@dataclass
class GenerativeExample:
    prompt: str  # the user message (e.g. the Table 3 instruction + input), without the answer
    answer: str  # the target, e.g. "Yes" / "No"
    system: str | None = None  # an optional system message (rendered as the judge renders one)
    label: float | None = None  # the gold label in [0, 1] behind a Yes/No answer (for eval metrics)
    id: str | None = None


def xdial_prompt(instruction: str, input_text: str) -> str:
    """The xDial-Eval Table 3 user message: ``### Instruction:`` + ``### Input:`` (the chat template
    adds the response part, e.g. ``### Response:`` with ``chat_template=alpaca``)."""
    return f"### Instruction:\n{instruction}\n\n### Input:\n{input_text}"


def prompt_for_item(task: Any, item: Mapping[str, Any]) -> str:
    """The user message the judge sends for ``item`` of harness task ``task`` (a TaskSpec or its
    name), so training prompts are byte-identical to the judged ones."""
    system, user = _task_messages(task, item)
    if system is not None:
        raise ValueError("the task's template has a system message: use example_for_item")
    return user


def example_for_item(task: Any, item: Mapping[str, Any], answer: str) -> GenerativeExample:
    """A training example whose prompt (system + user message) is the judge's for ``item``."""
    system, user = _task_messages(task, item)
    return GenerativeExample(user, answer, system)


def _get_task(task: Any) -> Any:
    if isinstance(task, str):
        from harness.tasks import get_task

        return get_task(task)
    return task


def _task_messages(task: Any, item: Mapping[str, Any]) -> tuple[str | None, str]:
    task = _get_task(task)
    msgs = task.build_request(item).messages
    return _system_user(task, msgs)


def _system_user(task: Any, msgs: Sequence[Any]) -> tuple[str | None, str]:
    roles = [m.role for m in msgs]
    if roles not in (["user"], ["system", "user"]):
        raise ValueError(f"task {task.name!r}: cannot train on a prompt with messages {roles}")
    return (msgs[0].content if len(msgs) == 2 else None), msgs[-1].content


# -- tokenization --------------------------------------------------------------------------------
class PromptEncoder:
    """Renders and tokenizes prompts exactly like the ``hf`` judge backend (it *is* that backend,
    without weights)."""

    def __init__(
        self,
        base_model: str,
        *,
        revision: str | None = None,
        chat_template: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        from harness.backends.hf import HFBackend

        self.backend = HFBackend(
            base_model,
            revision=revision,
            chat_template=chat_template,
            device="cpu",
            trust_remote_code=trust_remote_code,
        )
        self.tokenizer = self.backend.tokenizer

    @property
    def chat_template_name(self) -> str:
        return self.backend.chat_template_name

    def prompt_ids(self, prompt: str, system: str | None = None) -> list[int]:
        from harness.types import ChatMessage

        msgs = ([ChatMessage("system", system)] if system else []) + [ChatMessage("user", prompt)]
        return self.backend.encode_prompt(self.backend.render_prompt(msgs))

    def answer_ids(self, answer: str) -> list[int]:
        return list(self.tokenizer(answer, add_special_tokens=False)["input_ids"])


def encode_examples(
    examples: Sequence[GenerativeExample], encoder: PromptEncoder, max_length: int, train_eos: bool = False
) -> tuple[list[dict[str, list[int]]], dict[str, Any]]:
    """Token ids + labels (-100 on the prompt) per example, and counts (truncated prompts, answers)."""
    eos = encoder.tokenizer.eos_token_id
    rows: list[dict[str, list[int]]] = []
    truncated, answers = 0, collections.Counter[str]()
    for i, ex in enumerate(examples):
        if not ex.answer or not ex.answer.strip():
            raise ValueError(f"example {i} has an empty answer")
        ans = encoder.answer_ids(ex.answer) + ([eos] if train_eos and eos is not None else [])
        room = max_length - len(ans)
        if room < 1:
            raise ValueError(f"max_length={max_length} leaves no room for a prompt before {ex.answer!r}")
        prompt = encoder.prompt_ids(ex.prompt, ex.system)
        if len(prompt) > room:
            prompt = prompt[-room:]
            truncated += 1
        rows.append({"input_ids": prompt + ans, "labels": [-100] * len(prompt) + ans})
        answers[ex.answer] += 1
    if truncated:
        log.warning(
            "%d of %d prompts were longer than max_length and cut from the left", truncated, len(rows)
        )
    return rows, {"truncated_prompts": truncated, "answers": dict(answers)}


def pad_batch(rows: list[dict[str, list[int]]], pad_id: int, side: str) -> dict[str, Any]:
    """``input_ids`` / ``labels`` (-100) / ``attention_mask`` padded on the ``left`` or ``right``."""
    import torch

    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for b, r in enumerate(rows):
        k = len(r["input_ids"])
        span = slice(n - k, n) if side == "left" else slice(0, k)
        ids[b, span] = torch.tensor(r["input_ids"])
        labels[b, span] = torch.tensor(r["labels"])
        mask[b, span] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def make_left_pad_collate(pad_id: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    """Left-pad ``input_ids``/``labels``; attention mask and position ids as the judge builds them."""

    def collate(rows: list[dict[str, list[int]]]) -> dict[str, Any]:
        batch = pad_batch(rows, pad_id, "left")
        batch["position_ids"] = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        return batch

    return collate


# -- conversion ----------------------------------------------------------------------------------
def example_to_generative(
    ex: Any,
    labels: tuple[str, str] = ("Yes", "No"),
    *,
    threshold: float = ANSWER_THRESHOLD,
    where: str = "",
) -> GenerativeExample:
    """A discriminative :class:`~finetune.data.Example` (turn level: context + response; dialogue
    level: turns; label in [0, 1]) as a Table 3 instruction example: the judge's prompt for it under
    :data:`PROMPT_TASKS` and the answer ``labels[0]`` if ``label >= threshold`` else ``labels[1]``.
    Without ``roles`` the speakers alternate, the human first (the ``[H]`` / ``[C]`` tags of the
    dialogue-level prompt)."""
    from dataset_builders.helpers import dialogue_level_roles

    def bad(name: str, problem: str) -> ValueError:
        return ValueError(f"{where}example {getattr(ex, 'id', None)!r}: field {name!r} {problem}")

    label = getattr(ex, "label", None)
    if isinstance(label, bool) or not isinstance(label, int | float) or not math.isfinite(label):
        raise bad("label", f"is {label!r}, not a finite number")
    if not 0.0 <= label <= 1.0:
        raise bad("label", f"is {label!r}, outside [0, 1] (expected 0/1 or a normalised rating)")
    level = getattr(ex, "level", None)
    if level not in PROMPT_TASKS:
        raise bad("level", f"is {level!r}; expected one of {tuple(PROMPT_TASKS)}")
    texts = list(ex.context or []) if level == "turn" else list(ex.turns or [])
    if level == "turn" and (not isinstance(ex.response, str) or not ex.response.strip()):
        raise bad("response", "is empty (a turn-level example needs a response)")
    if level == "dialogue" and not texts:
        raise bad("turns", "is empty (a dialogue-level example needs turns)")
    n = len(texts) + (level == "turn")  # turn level: the context + the response
    roles = list(ex.roles) if getattr(ex, "roles", None) else dialogue_level_roles(n)
    if len(roles) != n:
        raise bad("roles", f"has {len(roles)} roles for {n} utterances")
    messages = [{"role": r, "text": t} for r, t in zip(roles, texts, strict=False)]
    if level == "turn":
        item = {
            "language": ex.language,
            "context": messages,
            "response": ex.response,
            "response_role": roles[-1],
            "reference": ex.reference,
        }
    else:
        item = {"language": ex.language, "turns": messages}
    task = _get_task(PROMPT_TASKS[level])
    template = task.templates.get(ex.language) or task.template_for("en")  # Table 3: English for all
    system, user = _system_user(task, template.render(task.fields(item)))
    answer = labels[0] if label >= threshold else labels[1]
    return GenerativeExample(user, answer, system, label=float(label), id=ex.id)


def instruction_to_generative(ex: Any, *, where: str = "") -> GenerativeExample:
    """An :class:`~finetune.data.InstructionExample` (system + prompt -> target) as it is."""
    for name in ("prompt", "target"):
        value = getattr(ex, name, None)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}example {getattr(ex, 'id', None)!r}: field {name!r} is empty")
    return GenerativeExample(ex.prompt, ex.target, ex.system or None, id=ex.id)


def prompt_templates() -> dict[str, dict[str, str]]:
    """The Table 3 templates converted examples get (recorded in the adapter metadata)."""
    out = {}
    for level, name in PROMPT_TASKS.items():
        tpl = _get_task(name).template_for("en")
        out[level] = {"task": name, "template": tpl.name, "template_hash": tpl.hash}
    return out


# -- DATA ----------------------------------------------------------------------------------------
@dataclass
class GenerativeData:
    """The examples to train (and evaluate) on, and the data version for the adapter metadata."""

    train: list[GenerativeExample]
    eval: list[GenerativeExample] | None
    version: dict[str, Any] = field(default_factory=dict)


def load_generative_data(
    data: str | os.PathLike[str],
    *,
    labels: tuple[str, str] = ("Yes", "No"),
    registry_root: str | os.PathLike[str] | None = None,
) -> GenerativeData:
    """``DATA`` of ``harness finetune generative`` (see the module docstring): a JSONL file, a
    training-data version directory or a registry reference ``NAME[@X.Y.Z]`` (in the registry at
    ``registry_root``; default: the harness registry)."""
    text = os.fspath(data)
    path = Path(text).expanduser()
    if path.is_file():
        return load_jsonl(path)
    if path.is_dir():
        return load_registered(text, path, labels=labels)
    from harness.data.registry import DatasetRegistry, DatasetRegistryError, split_ref

    try:
        split_ref(text)
    except DatasetRegistryError:
        raise FileNotFoundError(
            f"training data {text!r}: no such file or directory, and not a registry reference "
            "(NAME or NAME@X.Y.Z)"
        ) from None
    if text.endswith((".jsonl", ".json")):
        raise FileNotFoundError(f"training data {text!r}: no such file")
    try:
        directory = DatasetRegistry(registry_root).resolve(text).path
    except DatasetRegistryError as e:
        raise ValueError(f"training data {text!r}: {e}") from None
    return load_registered(text, directory, labels=labels)


def load_jsonl(path: Path) -> GenerativeData:
    """One ``{"prompt", "answer"[, "system"][, "label"]}`` per line; errors name the line and field."""
    out: list[GenerativeExample] = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f'{where}: expected an object {{"prompt", "answer"}}, got {type(row).__name__}')
        for name in ("prompt", "answer"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                problem = "missing" if name not in row else "not a non-empty string"
                raise ValueError(f"{where}: field {name!r} is {problem}")
        system, label = row.get("system"), row.get("label")
        if system is not None and not isinstance(system, str):
            raise ValueError(f"{where}: field 'system' is not a string")
        if label is not None and (isinstance(label, bool) or not isinstance(label, int | float)):
            raise ValueError(f"{where}: field 'label' is not a number")
        out.append(GenerativeExample(row["prompt"], row["answer"], system or None, label, row.get("id")))
    if not out:
        raise ValueError(f"training data {str(path)!r}: no examples")
    return GenerativeData(out, None, {"source": str(path), "format": "jsonl"})


def load_registered(ref: str, directory: Path, *, labels: tuple[str, str] = ("Yes", "No")) -> GenerativeData:
    """Config ``train`` (and ``test``, when recorded) of the training-data version at ``directory``
    (``ref``: how the user named it, for messages), converted to generative examples."""
    from finetune.data import TrainingDataError, load_training_data

    manifest_file = directory / "build_manifest.json"
    if not manifest_file.is_file():
        raise FileNotFoundError(
            f"training data {ref!r}: {directory} has no build_manifest.json (not a dataset version directory)"
        )
    manifest = json.loads(manifest_file.read_text("utf-8"))
    info = manifest.get("training_data")
    if not isinstance(info, dict) or not isinstance(info.get("configs"), dict):
        raise TrainingDataError(
            f"training data {ref!r}: {directory} is not a training-data version (its build_manifest.json "
            "has no 'training_data' record; register one with finetune.data.register_training_data)"
        )
    etype = info.get("example_type")
    if etype not in ("example", "instruction"):
        raise TrainingDataError(
            f"training data {ref!r}: field 'training_data.example_type' is {etype!r}; "
            "expected 'example' or 'instruction'"
        )
    if TRAIN_SPLIT not in info["configs"]:
        raise TrainingDataError(
            f"training data {ref!r}: no {TRAIN_SPLIT!r} split; splits: {', '.join(info['configs']) or 'none'}"
        )
    splits = [TRAIN_SPLIT] + ([EVAL_SPLIT] if EVAL_SPLIT in info["configs"] else [])
    converted: dict[str, list[GenerativeExample]] = {}
    languages: list[str] = []
    for split in splits:
        if (manifest.get("configs") or {}).get(split, {}).get("rows") == 0:
            raise TrainingDataError(f"training data {ref!r}: split {split!r} has no examples")
        try:
            items = load_training_data(directory, split)
        except TrainingDataError:
            raise
        except (KeyError, TypeError) as e:  # a table whose columns are not the registered schema
            raise TrainingDataError(f"training data {ref!r}, split {split!r}: wrong schema ({e!r})") from e
        except Exception as e:  # datasets / arrow: a missing or unreadable Parquet file
            cause = f"; {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""
            raise TrainingDataError(
                f"training data {ref!r}, split {split!r}: cannot be read ({type(e).__name__}: {e}{cause})"
            ) from e
        if not items:
            raise TrainingDataError(f"training data {ref!r}: split {split!r} has no examples")
        where = f"training data {ref!r}, split {split!r}: "
        if etype == "example":
            converted[split] = [example_to_generative(x, labels, where=where) for x in items]
        else:
            converted[split] = [instruction_to_generative(x, where=where) for x in items]
        if split == TRAIN_SPLIT:
            languages = sorted({x.language for x in items})
    release = manifest.get("release") or {}
    split_record = info.get("split") or None
    version = {
        "source": ref,
        "format": "registered",
        "name": release.get("name"),
        "version": release.get("version"),
        "fingerprint": manifest.get("fingerprint"),
        "path": str(directory),
        "example_type": etype,
        "train_split": TRAIN_SPLIT,
        "eval_split": EVAL_SPLIT if EVAL_SPLIT in converted else None,
        "eval_examples": len(converted.get(EVAL_SPLIT, [])),
        "languages": languages,
        "license": info.get("license"),
        "kinds": (info["configs"][TRAIN_SPLIT] or {}).get("kinds"),
        "split": {k: v for k, v in split_record.items() if not k.endswith("_dialogues")}
        if split_record
        else None,
    }
    if etype == "example":
        version["conversion"] = {
            "prompts": prompt_templates(),
            "answer": f"{labels[0]!r} if label >= {ANSWER_THRESHOLD} else {labels[1]!r}",
            "labels": list(labels),
            "threshold": ANSWER_THRESHOLD,
        }
    return GenerativeData(converted[TRAIN_SPLIT], converted.get(EVAL_SPLIT), version)


def gold_label(ex: GenerativeExample, labels: tuple[str, str]) -> float | None:
    """The example's label in [0, 1]: its ``label``, else 1 / 0 for an answer that is the positive /
    negative label word, else None (e.g. a distillation target)."""
    if ex.label is not None:
        return float(ex.label)
    return {labels[0]: 1.0, labels[1]: 0.0}.get(ex.answer.strip())


def p_yes_metrics(labels: Sequence[float], p_yes: Sequence[float]) -> dict[str, Any]:
    """Accuracy (P(Yes) >= 0.5 vs label >= 0.5), ROC AUC, mean P(Yes) of positives / negatives;
    Pearson / Spearman against graded labels."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    lab, s = np.asarray(labels, dtype=float), np.asarray(p_yes, dtype=float)
    y = (lab >= 0.5).astype(int)
    out: dict[str, Any] = {
        "positives": int(y.sum()),
        "negatives": int((y == 0).sum()),
        "accuracy": float(((s >= 0.5).astype(int) == y).mean()),
        "auc": float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None,
        "mean_p_yes_pos": float(s[y == 1].mean()) if y.any() else None,
        "mean_p_yes_neg": float(s[y == 0].mean()) if (y == 0).any() else None,
    }
    if len(set(lab.tolist())) > 2:  # graded labels: how well P(Yes) follows them
        from scipy.stats import pearsonr, spearmanr

        ok = len(set(s.tolist())) > 1
        out["pearson"] = float(pearsonr(lab, s)[0]) if ok else None
        out["spearman"] = float(spearmanr(lab, s)[0]) if ok else None
    return out
