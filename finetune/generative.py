"""Generative dialogue evaluators: a causal LM instruction-tuned with LoRA to answer Yes / No.

xDial-Eval §4 ("Proposed Metrics"): turn-level and dialogue-level synthetic data (relevant vs
irrelevant responses, coherent vs incoherent dialogues) are put into the model's instruction
template (Table 3: ``### Instruction: … ### Input: … ### Response:``) and the LLM is fine-tuned with
LoRA; the fine-tuned model scores like the zero-shot one, ``P(Yes) / (P(Yes) + P(No))``.

Training and judging share one prompt path. An example's ``prompt`` is the *user message* — for the
xDial-Eval tasks the rendered Table 3 template (:func:`prompt_for_item` builds it from a task item
exactly as the judge does) — and it is rendered and tokenized by the harness's own
:class:`~harness.backends.hf.HFBackend` (the tokenizer's chat template, or
``chat_template=alpaca|plain|<jinja>`` as in the judge spec), so the trained model sees the very
token ids it is later judged on. The target is the answer's tokens (``tokenizer(answer,
add_special_tokens=False)``, as the judge scores label words), optionally followed by EOS; the loss
is the cross-entropy on those tokens only. Prompts longer than ``max_length`` are cut from the
left, like the judge's ``max_length``.

Only the adapter is saved (``<output_dir>/adapter``); ``dialeval_adapter.json`` (in the output
directory and, as a copy, in the adapter directory) records the base model id + revision, the chat
template, the LoRA settings, the training data version, the hyper-parameters, the training result
and the judge spec to use it: ``hf:<base>,adapter=<output_dir>/adapter[,chat_template=…]``.
:func:`merge_adapter` writes a merged full model for backends without adapter support.
"""

from __future__ import annotations

import collections
import json
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from finetune.trainer import TrainResult, TrainSettings, train

log = logging.getLogger(__name__)

METADATA_FILE = "dialeval_adapter.json"
ADAPTER_DIR = "adapter"

# LoRA target modules by ``config.model_type``: all attention projections (LoRA paper / common
# practice for instruction tuning). Other architectures fall back to peft's own per-architecture
# defaults, then to ``all-linear``.
DEFAULT_TARGET_MODULES: dict[str, list[str]] = {
    **{
        t: ["q_proj", "k_proj", "v_proj", "o_proj"]
        for t in ("llama", "qwen2", "qwen3", "mistral", "mixtral", "gemma", "gemma2", "gemma3_text", "olmo2")
    },
    "phi": ["q_proj", "k_proj", "v_proj", "dense"],
    "phi3": ["qkv_proj", "o_proj"],
    "baichuan": ["W_pack", "o_proj"],
    "bloom": ["query_key_value", "dense"],
    "falcon": ["query_key_value", "dense"],
    "gpt_neox": ["query_key_value", "dense"],
    "gpt2": ["c_attn", "c_proj"],
}


class LoraSettings(BaseModel):
    """LoRA hyper-parameters (the ``lora:`` block of a config)."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(8, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | None = None  # None: by architecture (DEFAULT_TARGET_MODULES)


class GenerativeConfig(BaseModel):
    """A generative-evaluator training job."""

    model_config = ConfigDict(extra="forbid")

    base_model: str
    revision: str | None = None
    chat_template: str | None = None  # as the hf backend option: None = the tokenizer's template
    lora: LoraSettings = Field(default_factory=LoraSettings)
    max_length: int = Field(1024, ge=2)  # prompt + answer tokens; prompts are cut from the left
    train_eos: bool = False  # also train EOS after the answer
    labels: tuple[str, str] = ("Yes", "No")  # the judge's label words (positive, negative)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    train: TrainSettings = Field(default_factory=TrainSettings)


@dataclass
class GenerativeExample:
    prompt: str  # the user message (e.g. the Table 3 instruction + input), without the answer
    answer: str  # the target, e.g. "Yes" / "No"
    system: str | None = None  # an optional system message (rendered as the judge renders one)


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


def _task_messages(task: Any, item: Mapping[str, Any]) -> tuple[str | None, str]:
    if isinstance(task, str):
        from harness.tasks import get_task

        task = get_task(task)
    msgs = task.build_request(item).messages
    roles = [m.role for m in msgs]
    if roles not in (["user"], ["system", "user"]):
        raise ValueError(f"task {task.name!r}: cannot train on a prompt with messages {roles}")
    return (msgs[0].content if len(msgs) == 2 else None), msgs[-1].content


# -- model ---------------------------------------------------------------------------------------
def default_target_modules(model_type: str) -> list[str] | str:
    if model_type in DEFAULT_TARGET_MODULES:
        return list(DEFAULT_TARGET_MODULES[model_type])
    try:
        from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as peft_defaults

        if model_type in peft_defaults:
            return list(peft_defaults[model_type])
    except ImportError:  # pragma: no cover - peft layout changed
        pass
    return "all-linear"


def resolve_dtype(dtype: str) -> Any:
    import torch

    if dtype == "auto":
        return (
            torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
        )
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def load_lora_model(
    base_model: str,
    lora: LoraSettings,
    *,
    revision: str | None = None,
    dtype: str = "auto",
    gradient_checkpointing: bool = False,
    trust_remote_code: bool = False,
    seed: int = 0,
) -> Any:
    """The base causal LM with a fresh (seeded) LoRA adapter; only the adapter is trainable."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        base_model, revision=revision, dtype=resolve_dtype(dtype), trust_remote_code=trust_remote_code
    )
    model.config.use_cache = False
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    targets = lora.target_modules or default_target_modules(model.config.model_type)
    config = LoraConfig(
        task_type="CAUSAL_LM",
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        bias="none",
        revision=revision,
    )
    torch.manual_seed(seed)  # the adapter's initialisation
    with warnings.catch_warnings():  # peft reads a property transformers 5 deprecates
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, config)


def lora_metadata(model: Any) -> dict[str, Any]:
    cfg = model.peft_config["default"]
    tm = cfg.target_modules
    return {
        "type": "lora",
        "r": cfg.r,
        "alpha": cfg.lora_alpha,
        "dropout": cfg.lora_dropout,
        "target_modules": sorted(tm) if isinstance(tm, (set, list, tuple)) else tm,
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


# -- data ----------------------------------------------------------------------------------------
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
    rows, truncated, answers = [], 0, collections.Counter()
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


def make_answer_loss(model: Any) -> Callable[[Any, dict[str, Any]], Any]:
    """Mean cross-entropy over the answer tokens of a left-padded batch. Answers sit at the end of
    every row, so only the last positions' logits are computed (``logits_to_keep``)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    accepts = set(inspect.signature(base.forward).parameters)

    def loss_fn(m: Any, batch: dict[str, Any]) -> Any:
        import torch.nn.functional as F

        labels = batch["labels"]
        cols = (labels != -100).any(dim=0).nonzero()
        first = int(cols[0]) if len(cols) else labels.shape[1] - 1
        keep = labels.shape[1] - first + 1
        kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if "position_ids" in accepts:
            kwargs["position_ids"] = batch["position_ids"]
        if "logits_to_keep" in accepts:
            kwargs["logits_to_keep"] = keep
        logits = m(**kwargs).logits[:, -keep:, :].float()
        target = labels[:, -keep:]
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1), ignore_index=-100
        )

    return loss_fn


# -- jobs ----------------------------------------------------------------------------------------
def train_generative(
    examples: Sequence[GenerativeExample],
    cfg: GenerativeConfig,
    output_dir: str | Path,
    data_version: dict[str, Any] | None = None,
    progress: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Instruction-tune ``cfg.base_model`` with LoRA on ``examples``; save the adapter and its
    metadata under ``output_dir``; return the metadata (also written to ``dialeval_adapter.json``)."""
    if len(examples) == 0:
        raise ValueError("the training set is empty")
    out = Path(output_dir)
    encoder = PromptEncoder(cfg.base_model, revision=cfg.revision, chat_template=cfg.chat_template,
                            trust_remote_code=cfg.trust_remote_code)  # fmt: skip
    rows, stats = encode_examples(examples, encoder, cfg.max_length, cfg.train_eos)
    model = _load(cfg)
    result = train(
        model,
        rows,
        make_left_pad_collate(encoder.tokenizer.pad_token_id),
        make_answer_loss(model),
        cfg.train,
        out,
        progress=progress,
        description="generative evaluator",
        on_step=on_step,
    )
    pos, neg = cfg.labels
    data = {
        **(data_version or {}),
        "examples": len(rows),
        "positives": stats["answers"].get(pos, 0),
        "negatives": stats["answers"].get(neg, 0),
        "answers": stats["answers"],
        "truncated_prompts": stats["truncated_prompts"],
    }
    hp = {"max_length": cfg.max_length, "train_eos": cfg.train_eos, "dtype": cfg.dtype,
          "gradient_checkpointing": cfg.gradient_checkpointing, "trust_remote_code": cfg.trust_remote_code,
          **cfg.train.model_dump()}  # fmt: skip
    return save_adapter(
        model,
        out,
        kind="generative-evaluator",
        base_model=cfg.base_model,
        revision=cfg.revision,
        chat_template=cfg.chat_template,
        chat_template_name=encoder.chat_template_name,
        chat_template_text=encoder.backend.chat_template,
        training_data=data,
        hyperparameters=hp,
        result=result,
        extra={"labels": list(cfg.labels)},
    )


def _load(cfg: Any) -> Any:
    return load_lora_model(
        cfg.base_model,
        cfg.lora,
        revision=cfg.revision,
        dtype=cfg.dtype,
        gradient_checkpointing=cfg.gradient_checkpointing,
        trust_remote_code=cfg.trust_remote_code,
        seed=cfg.train.seed,
    )


def judge_spec(
    model: str, adapter_dir: str | Path | None, revision: str | None, chat_template: str | None
) -> str:
    """The judge spec string that loads this model (inline Jinja templates cannot be named in it)."""
    spec = f"hf:{model}" + (f"@{revision}" if revision else "")
    if adapter_dir:
        spec += f",adapter={adapter_dir}"
    if chat_template and "{" not in chat_template and "," not in chat_template:
        spec += f",chat_template={chat_template}"
    return spec


def save_adapter(
    model: Any,
    output_dir: Path,
    *,
    kind: str,
    base_model: str,
    revision: str | None,
    chat_template: str | None,
    chat_template_name: str,
    chat_template_text: str,
    training_data: dict[str, Any],
    hyperparameters: dict[str, Any],
    result: TrainResult,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Save only the adapter (main process) + ``dialeval_adapter.json``; return the metadata."""
    import accelerate
    import peft
    import torch
    import transformers
    from accelerate import PartialState

    from harness.backends.hf_templates import adapter_sha, short_sha

    adapter_dir = output_dir / ADAPTER_DIR
    state = PartialState()
    if state.is_main_process:
        model.save_pretrained(str(adapter_dir))
    state.wait_for_everyone()
    meta = {
        "kind": kind,
        "base_model": base_model,
        "base_revision": revision,
        "adapter_dir": str(adapter_dir),
        "adapter": lora_metadata(model),
        "adapter_sha256": adapter_sha(adapter_dir),
        "chat_template": chat_template,
        "chat_template_name": chat_template_name,
        "chat_template_sha256": short_sha(chat_template_text),
        "judge_spec": judge_spec(base_model, adapter_dir, revision, chat_template),
        **(extra or {}),
        "training_data": training_data,
        "hyperparameters": hyperparameters,
        "train_result": result.to_dict(),
        "losses": result.losses,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "accelerate": accelerate.__version__,
        },  # fmt: skip
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if state.is_main_process:
        text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
        (output_dir / METADATA_FILE).write_text(text, "utf-8")
        (adapter_dir / METADATA_FILE).write_text(text, "utf-8")
    return meta


def merge_adapter(adapter_dir: str | Path, out_dir: str | Path, *, dtype: str = "auto") -> Path:
    """Merge a saved LoRA adapter into its base model (``merge_and_unload``) and save the full model
    + tokenizer to ``out_dir`` (judge it as ``hf:<out_dir>``)."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter_dir, out = Path(adapter_dir), Path(out_dir)
    meta_file = adapter_dir / METADATA_FILE
    meta = json.loads(meta_file.read_text("utf-8")) if meta_file.is_file() else {}
    pcfg = PeftConfig.from_pretrained(str(adapter_dir))
    base = meta.get("base_model") or pcfg.base_model_name_or_path
    revision = meta.get("base_revision") or getattr(pcfg, "revision", None)
    trust = bool((meta.get("hyperparameters") or {}).get("trust_remote_code", False))
    model = AutoModelForCausalLM.from_pretrained(
        base, revision=revision, dtype=resolve_dtype(dtype), trust_remote_code=trust
    )
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(base, revision=revision, trust_remote_code=trust).save_pretrained(str(out))
    if meta:
        merged_meta = {**meta, "merged_from": str(adapter_dir),
                       "judge_spec": judge_spec(str(out), None, None, meta.get("chat_template"))}  # fmt: skip
        text = json.dumps(merged_meta, indent=2, ensure_ascii=False) + "\n"
        (out / "dialeval_merged.json").write_text(text, "utf-8")
    return out


# -- command line ----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``[accelerate launch …] python -m finetune.generative CONFIG.yaml EXAMPLES.jsonl OUTPUT_DIR``

    CONFIG is a :class:`GenerativeConfig` in YAML; EXAMPLES has one ``{"prompt", "answer"}`` per line.
    """
    import argparse

    import yaml

    p = argparse.ArgumentParser(prog="python -m finetune.generative", description=main.__doc__)
    p.add_argument("config")
    p.add_argument("examples")
    p.add_argument("output_dir")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    cfg = GenerativeConfig.model_validate(yaml.safe_load(Path(a.config).read_text("utf-8")))
    rows = [json.loads(x) for x in Path(a.examples).read_text("utf-8").splitlines() if x.strip()]
    examples = [GenerativeExample(r["prompt"], r["answer"]) for r in rows]
    meta = train_generative(
        examples, cfg, a.output_dir, {"source": str(a.examples)}, progress=not a.no_progress
    )
    print(json.dumps({"adapter_dir": meta["adapter_dir"], "judge_spec": meta["judge_spec"],
                      **meta["train_result"]}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
