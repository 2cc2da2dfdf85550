"""LoRA on a causal LM, shared by the generative evaluator (:mod:`finetune.generative`) and chatbot
SFT (:mod:`finetune.sft`): the LoRA settings of a config, the base model with a fresh, seeded adapter
(target modules by architecture), and the adapter directory a training run leaves — only the
adapter (``<output_dir>/adapter``) plus ``dialeval_adapter.json`` (base model id + revision, chat
template, LoRA settings, training data, hyper-parameters, training result and the judge spec that
loads it) — and :func:`merge_adapter`, which writes a merged full model for backends without
adapter support.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from finetune.trainer import TrainResult


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

    from harness.modelstore import resolve

    # a packaged model's short name (smollm2-135m-instruct) loads its materialised checkpoint
    path = resolve(base_model) or base_model
    model = AutoModelForCausalLM.from_pretrained(
        path, revision=revision, dtype=resolve_dtype(dtype), trust_remote_code=trust_remote_code
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
        peft_model = get_peft_model(model, config)
    # the adapter config names the base as given (a short name, not this machine's checkpoint path)
    peft_model.peft_config["default"].base_model_name_or_path = base_model
    return peft_model


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
        },
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

    from harness.modelstore import resolve

    adapter_dir, out = Path(adapter_dir), Path(out_dir)
    meta_file = adapter_dir / METADATA_FILE
    meta = json.loads(meta_file.read_text("utf-8")) if meta_file.is_file() else {}
    pcfg = PeftConfig.from_pretrained(str(adapter_dir))
    base = meta.get("base_model") or pcfg.base_model_name_or_path
    revision = meta.get("base_revision") or getattr(pcfg, "revision", None)
    trust = bool((meta.get("hyperparameters") or {}).get("trust_remote_code", False))
    path = resolve(base) or base  # a packaged model's short name: its materialised checkpoint
    model = AutoModelForCausalLM.from_pretrained(
        path, revision=revision, dtype=resolve_dtype(dtype), trust_remote_code=trust
    )
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust).save_pretrained(str(out))
    if meta:
        merged_meta = {
            **meta,
            "merged_from": str(adapter_dir),
            "judge_spec": judge_spec(str(out), None, None, meta.get("chat_template")),
        }
        text = json.dumps(merged_meta, indent=2, ensure_ascii=False) + "\n"
        (out / "dialeval_merged.json").write_text(text, "utf-8")
    return out
