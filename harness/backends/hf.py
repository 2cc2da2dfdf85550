"""``hf:<model>`` — a local transformers causal LM (optionally with an unmerged PEFT LoRA adapter).

Prompts are rendered with the tokenizer's chat template (or ``chat_template=alpaca|plain|<jinja>``)
and decoded by a small batched loop over the model's KV cache: left padding with explicit
attention masks and position ids (so batched results equal one-by-one results), greedy or seeded
per-request sampling, stop strings, and log-probs from the *unprocessed* distribution (one
decoding step of one row: :mod:`harness.backends.hf_decode`).

Label words (``Request.choices``) are scored exactly: ``log P(choice | prompt)`` as the start of
the assistant reply, by teacher forcing. When every label is one token, the first decoding step
gives them all (plus the greedy next token); multi-token labels are scored in batched forward
passes over prompt+label sequences.

A continuation (``Request.continuation``, GPTScore) is scored, not generated: the log-prob of each
of its tokens after the rendered prompt (left-truncated to ``max_length`` like any prompt), by
batched teacher forcing (:mod:`harness.backends.hf_scoring`). No guided decoding: a
``Request.json_schema`` is ignored (the judge validates the reply). A template that raises on a
system message or drops it gets the system content prefixed to the first user message
(:attr:`HFBackend.system_role_mode`; ``Response.raw["system_role"]`` for requests with one).

The tokenizer and config load in ``__init__`` (cheap), the weights on first use, so
:meth:`identity` never loads weights.

Where the weights come from: a Hub id or a local checkpoint directory; a GGUF file
(``hf:<dir>,gguf_file=<file>`` or ``hf:/path/to/model.gguf``: dequantised by transformers' GGUF
path on every load, the file's SHA-256 in the identity); or the short name of a packaged model
(``hf:smollm2-135m-instruct``, :mod:`harness.modelstore`): its checkpoint directory, materialised once
from the packaged weights, with the record's weights fingerprint in the identity.
"""

from __future__ import annotations

import functools
import gc
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from harness.backends import hf_scoring
from harness.backends.base import Backend, Capabilities
from harness.backends.hf_decode import Row, RowDecoding
from harness.backends.hf_templates import (
    ChatTemplateError,
    adapter_sha,
    local_model_fingerprint,
    resolve_chat_template,
    resolve_device,
    resolve_dtype,
    resolve_weights,
    short_sha,
)
from harness.jsontypes import JSON, JSONObject
from harness.models import locate_model
from harness.options import check_option
from harness.types import MAX_NEW_TOKENS, ChatMessage, Request, Response, Usage

__all__ = ["HFBackend", "ChatTemplateError", "PromptTooLongError"]

# Options passed through to ``from_pretrained`` of the model.
_MODEL_OPTIONS = ("attn_implementation", "device_map")
_POSITION_LIMIT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


class PromptTooLongError(ValueError):
    """A rendered prompt is longer than the model's position limit (and no max_length was set)."""


class HFBackend(hf_scoring.SystemRoleFallback, RowDecoding, Backend):
    kind = "hf"
    capabilities = Capabilities(choice_logprobs=True, token_logprobs=True, continuation_logprobs=True)

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        batch_size: int = 8,
        adapter: str | None = None,
        chat_template: str | None = None,
        max_length: int | None = None,
        trust_remote_code: bool = False,
        gguf_file: str | None = None,
        **options: JSON,
    ) -> None:
        super().__init__(model, revision=revision, **options)
        from transformers import AutoConfig, AutoTokenizer

        given = options.pop("model_kwargs", None) or {}
        if not isinstance(given, Mapping):
            raise ValueError(
                f"hf backend: model_kwargs must be a mapping of from_pretrained arguments, got {given!r}"
            )
        self.model_kwargs: dict[str, object] = dict(given)
        for key in _MODEL_OPTIONS:
            if key in options:
                self.model_kwargs[key] = options.pop(key)
        if options:
            raise ValueError(
                f"unknown hf backend option(s) {sorted(options)}; known: device, dtype, batch_size, adapter, "
                f"chat_template, max_length, trust_remote_code, gguf_file, model_kwargs, "
                f"{', '.join(_MODEL_OPTIONS)}"
            )
        opt = functools.partial(check_option, "hf backend")
        self.batch_size = opt("batch_size", batch_size, int, lo=1, hi=4096)  # prompts per forward pass
        self.max_length = opt("max_length", max_length, int, lo=1, hi=MAX_NEW_TOKENS, allow_none=True)
        self.trust_remote_code = opt("trust_remote_code", trust_remote_code, bool)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.adapter = str(adapter) if adapter else None
        self.truncated = 0  # prompts truncated to max_length so far

        # what from_pretrained loads: a packaged model's checkpoint, a GGUF file's folder, or `model`
        self.source = resolve_weights(model, gguf_file)
        self.load_from = self.source.path
        self.gguf_file = self.source.gguf_file
        # a model that is neither local, cached nor downloadable now fails here, at once
        self.local_files_only = locate_model(
            self.load_from, revision, owner="hf backend: model"
        ).local_files_only
        load_kwargs: dict[str, str | bool | None] = {
            "revision": revision,
            "trust_remote_code": self.trust_remote_code,
            "local_files_only": self.local_files_only,
        }
        if self.gguf_file is not None:
            load_kwargs["gguf_file"] = self.gguf_file
        self.tokenizer = AutoTokenizer.from_pretrained(self.load_from, **load_kwargs)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.config = AutoConfig.from_pretrained(self.load_from, **load_kwargs)
        self.chat_template_name, self.chat_template = resolve_chat_template(
            chat_template, getattr(self.tokenizer, "chat_template", None), model
        )
        text_config = (
            self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        )
        self.max_positions: int | None = next(
            (
                int(v)
                for k in _POSITION_LIMIT_KEYS
                if isinstance(v := getattr(text_config, k, None), int) and v > 0
            ),
            None,
        )
        self._adapter_dir = self._resolve_adapter(self.adapter) if self.adapter else None
        self._model: Any = None
        self._eos_ids: set[int] = set()
        self._accepts: set[str] = set()
        self._input_device = torch.device(self.device)
        self._tok_str: dict[int, str] = {}
        self._bos_added: bool | None = None
        self._identity: JSONObject | None = None
        self._lock = threading.RLock()

    # -- setup ----------------------------------------------------------------------------------
    def _resolve_adapter(self, adapter: str) -> Path:
        p = Path(adapter).expanduser()
        if p.is_dir():
            return p
        from huggingface_hub import snapshot_download

        try:
            return Path(snapshot_download(adapter, allow_patterns=["adapter_*", "*.json"]))
        except Exception as e:  # noqa: BLE001 - re-raised with context
            raise FileNotFoundError(
                f"PEFT adapter {adapter!r} is neither a local directory nor a reachable Hub repo: {e}"
            ) from e

    def _ensure_model(self) -> Any:
        if self._model is not None:
            return self._model
        t_load = time.perf_counter()
        from transformers import AutoModelForCausalLM

        kwargs: dict[str, object] = {
            "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code,
            "local_files_only": self.local_files_only,
            **self.model_kwargs,
        }
        if self.device != "cpu":
            kwargs.setdefault("device_map", self.device)
        if self.gguf_file is not None:
            kwargs["gguf_file"] = self.gguf_file
        # a PreTrainedModel of the checkpoint's class, or a PeftModel around it (below)
        from harness.model_loading import quiet_loading

        with quiet_loading():  # no "Loading weights" bar: the run's own bars show its progress
            model: Any = AutoModelForCausalLM.from_pretrained(
                self.load_from, revision=self.revision, **kwargs
            )
        if "device_map" not in kwargs:
            model.to(self.device)
        if self._adapter_dir is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(self._adapter_dir))
        model.eval()
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._accepts = set(inspect.signature(base.forward).parameters)
        self._input_device = model.get_input_embeddings().weight.device
        eos: set[int] = set()
        for src in (getattr(base, "generation_config", None), self.config, self.tokenizer):
            v = getattr(src, "eos_token_id", None)
            eos.update([v] if isinstance(v, int) else list(v or []))
        self._eos_ids = eos
        self._model = model
        self.stats.load_seconds += time.perf_counter() - t_load
        return model

    def close(self) -> None:
        with self._lock:
            if self._model is None:
                return
            self._model = None
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    # -- identity -------------------------------------------------------------------------------
    def _identity_extras(self) -> JSONObject:
        if self._identity is None:
            d: JSONObject = {
                "dtype": str(self.dtype).removeprefix("torch."),
                "chat_template": self.chat_template_name,
                "chat_template_sha256": short_sha(self.chat_template),
            }
            if self.source.identity:  # a packaged model or a GGUF file: hashes of the weights
                d.update(self.source.identity)
            elif Path(self.load_from).is_dir():
                d["model_fingerprint"] = local_model_fingerprint(self.load_from)
            else:
                d["resolved_revision"] = getattr(self.config, "_commit_hash", None)
            if self._adapter_dir is not None:  # set exactly when self.adapter is
                d["adapter"] = self.adapter
                d["adapter_sha256"] = adapter_sha(self._adapter_dir)
            if self.max_length is not None:
                d["max_length"] = self.max_length
            self._identity = d
        return dict(self._identity)

    # -- prompts --------------------------------------------------------------------------------
    def _apply_template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, chat_template=self.chat_template
        )

    def render_prompt(self, messages: Request | tuple[ChatMessage, ...] | list[ChatMessage]) -> str:
        """The prompt text a request is rendered to (chat template + generation prompt)."""
        if isinstance(messages, Request):
            messages = messages.messages
        return self._apply_template(self._chat_dicts(messages))

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a rendered prompt.

        Like ``apply_chat_template(tokenize=True)``, no special tokens are added (a model's template
        renders its own BOS; an added EOS would end the prompt). With a built-in or custom template,
        BOS is prepended when the tokenizer normally starts sequences with it (Alpaca-tuned Llamas).
        """
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        bos = self.tokenizer.bos_token_id
        if self.chat_template_name != "tokenizer" and bos is not None and self._adds_bos():
            if not ids or ids[0] != bos:
                ids.insert(0, bos)
        return ids

    def _adds_bos(self) -> bool:
        if self._bos_added is None:
            probe = self.tokenizer("a", add_special_tokens=True)["input_ids"]
            self._bos_added = bool(probe) and probe[0] == self.tokenizer.bos_token_id
        return self._bos_added

    def _prepare(self, index: int, req: Request) -> Row:
        ids = self.encode_prompt(self.render_prompt(req))
        truncated = False
        if self.max_length is not None and len(ids) > self.max_length:
            ids = ids[-self.max_length :]
            truncated = True
            self.truncated += 1
        limit = self.max_positions
        cont_ids = None
        if req.continuation is not None:
            cont_ids = hf_scoring.continuation_ids(self.tokenizer, req.continuation)
        n = len(ids) + len(cont_ids or [])
        if limit is not None and n > limit:
            raise PromptTooLongError(
                f"request {index}: the rendered prompt{' + continuation' if cont_ids else ''} is {n} tokens, "
                f"longer than the limit of {limit} "
                f"positions (max_position_embeddings) of {self.model}; pass max_length=N to truncate prompts "
                "from the left"
            )
        max_new = req.config.max_tokens
        if limit is not None:
            max_new = max(1, min(max_new, limit - len(ids) + 1))
        choice_ids = None
        if req.choices is not None:
            choice_ids = {
                c: list(self.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in req.choices
            }
        return Row(
            index, req, ids, truncated, max_new, choice_ids, cont_ids=cont_ids, finished=bool(cont_ids)
        )

    # -- generation -----------------------------------------------------------------------------
    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        with self._lock:
            self._ensure_model()
            with torch.inference_mode():
                return self._run(requests, emit)

    def _run(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        rows = [self._prepare(i, r) for i, r in enumerate(requests)]
        out: list[Response | None] = [None] * len(rows)

        def finish(batch: list[Row]) -> None:
            for r in batch:
                resp = self._response(r)
                out[r.index] = resp
                emit(r.index, resp)

        cont = [(r, r.cont_ids) for r in rows if r.cont_ids is not None]
        if cont:
            lps = hf_scoring.score_continuations(self, [(r.ids, cids) for r, cids in cont])
            for (r, _), lp in zip(cont, lps, strict=True):
                r.cont_lps = lp
            finish([r for r, _ in cont])
        tf_rows = [r for r in rows if r.choice_ids is not None and not r.single_token_choices]
        if tf_rows:
            self._score_teacher_forced(tf_rows)
            done = []
            for r in tf_rows:
                if r.max_new == 1 and r.first_logits is not None:
                    self._advance(r, r.first_logits, int(r.first_logits.argmax()))
                    done.append(r)
                r.first_logits = None
            finish(done)
        pending = sorted((r for r in rows if not r.finished), key=lambda r: -len(r.ids))
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            self._decode(batch)
            finish(batch)
        return out  # type: ignore[return-value]  # finish() filled every slot

    def _pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Left-pad sequences; return input ids, attention mask and position ids."""
        n = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), n), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), n), dtype=torch.long)
        for b, s in enumerate(seqs):
            ids[b, n - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[b, n - len(s) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = self._input_device
        return ids.to(dev), mask.to(dev), pos.to(dev)

    def _forward(self, ids, mask, pos, cache, keep: int, use_cache: bool) -> tuple[torch.Tensor, Any]:
        kwargs: dict[str, object] = {"input_ids": ids, "attention_mask": mask, "use_cache": use_cache}
        if "position_ids" in self._accepts:
            kwargs["position_ids"] = pos
        if "logits_to_keep" in self._accepts:
            kwargs["logits_to_keep"] = keep
        if cache is not None:
            kwargs["past_key_values"] = cache
        res = self._model(**kwargs)
        return res.logits[:, -keep:, :].float(), (res.past_key_values if use_cache else None)

    def _decode(self, rows: list[Row]) -> None:
        """Batched decoding with a KV cache until every row has finished."""
        ids, mask, pos = self._pad([r.ids for r in rows])
        cache = None
        pad = self.tokenizer.pad_token_id
        steps = max(r.max_new for r in rows)
        for step in range(steps):
            if steps == 1:  # one token (P(Yes)): right padding, fused causal attention
                logits = hf_scoring.last_token_logits(self, [r.ids for r in rows])
            else:
                logits, cache = self._forward(ids, mask, pos, cache, keep=1, use_cache=steps > 1)
                logits = logits[:, -1, :]
            if step == 0 and any(r.single_token_choices for r in rows):
                lsm = torch.log_softmax(logits, dim=-1)
                for b, r in enumerate(rows):
                    if r.single_token_choices and r.choice_ids is not None:
                        r.choice_lp = {c: float(lsm[b, t[0]]) for c, t in r.choice_ids.items()}
            greedy = logits.argmax(dim=-1).tolist()
            nxt = []
            for b, r in enumerate(rows):
                if not r.finished:
                    self._advance(r, logits[b], greedy[b])
                nxt.append(r.gen[-1] if r.gen and not r.finished else pad)
            if all(r.finished for r in rows):
                break
            ids = torch.tensor(nxt, dtype=torch.long, device=ids.device).unsqueeze(1)
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            pos = pos[:, -1:] + 1
        del cache

    def _score_teacher_forced(self, rows: list[Row]) -> None:
        """Exact log P(label | prompt) for labels of any length, batched over prompt+label sequences."""
        items: list[tuple[Row, dict[str, float], str, list[int]]] = []  # (row, its log-probs, label, ids)
        for r in rows:  # rows with labels (choice_ids set)
            lp: dict[str, float] = {}
            r.choice_lp = lp
            for c, cids in (r.choice_ids or {}).items():
                if cids:
                    items.append((r, lp, c, cids))
                else:
                    lp[c] = 0.0  # the empty string: log P = 0
        items.sort(key=lambda it: -(len(it[0].ids) + len(it[3])))
        for start in range(0, len(items), self.batch_size):
            chunk = items[start : start + self.batch_size]
            keep = max(len(cids) for _, _, _, cids in chunk) + 1
            ids, mask, pos = self._pad([r.ids + cids for r, _, _, cids in chunk])
            logits, _ = self._forward(ids, mask, pos, None, keep=keep, use_cache=False)
            lsm = torch.log_softmax(logits, dim=-1)
            for b, (r, lp, c, cids) in enumerate(chunk):
                first = keep - len(cids) - 1
                target = torch.tensor(cids, device=lsm.device).unsqueeze(1)
                lp[c] = float(lsm[b, first : first + len(cids)].gather(-1, target).sum())
                if r.first_logits is None:
                    r.first_logits = logits[b, first].clone()

    def _response(self, r: Row) -> Response:
        raw: JSONObject = {"prompt_tokens": len(r.ids), "truncated": r.truncated}
        raw.update(self._system_raw(r.req.messages))
        if r.cont_ids is not None:
            if r.cont_lps is None:
                raise RuntimeError(f"request {r.index}: its continuation was not scored")
            decode = hf_scoring.tokenizer_decoder(self.tokenizer)
            return hf_scoring.continuation_response(decode, len(r.ids), r.cont_ids, r.cont_lps, raw)
        text = self.tokenizer.decode(r.gen, skip_special_tokens=True)
        token_lps = list(r.token_lps) if r.req.config.logprobs else None
        if r.stop_at is not None:
            text = text[: r.stop_at]
            if token_lps is not None:
                keep = 0
                if r.stop_at > 0:  # tokens up to the one that reaches the cut
                    keep = next(
                        (
                            k
                            for k in range(1, len(r.gen) + 1)
                            if len(self.tokenizer.decode(r.gen[:k], skip_special_tokens=True)) >= r.stop_at
                        ),
                        len(r.gen),
                    )
                token_lps = token_lps[:keep]
        if r.choice_ids is not None:
            raw["choice_tokens"] = {c: len(t) for c, t in r.choice_ids.items()}
        choice_lp: dict[str, float | None] | None = None
        if r.req.choices is not None:
            scored = r.choice_lp or {}  # set for every request with choices
            choice_lp = {c: scored[c] for c in r.req.choices}
        return Response(
            text=text,
            choice_logprobs=choice_lp,
            token_logprobs=token_lps,
            usage=Usage(prompt_tokens=len(r.ids), completion_tokens=r.n_generated),
            finish_reason=r.finish_reason,
            raw=raw,
        )
