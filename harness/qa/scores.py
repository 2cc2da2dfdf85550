"""Scores of translation QA (xDial-Eval §3.2, Table 2), one function per method:

* :func:`adequacy` — LLM adequacy 1–5 with the paper's App. A prompt (Table 6), through any judge
  spec (an LLM judge writes "adequacy: x", parsed; a parse failure is ``None``, counted; other judge
  kinds score the (source, translation) pair their own way, e.g. an ``embed:`` judge's cosine);
* :func:`back_translate` — back-translation to the source language with a ``--translator`` LLM;
* :func:`backtranslation_scores` — the back-translation against the source: sacreBLEU BLEU and chrF
  (corpus level per language, sentence chrF per segment) and BERTScore F1 (the packaged MiniLM,
  :func:`harness.judges.refmetrics.bertscore_scores`);
* :func:`cometkiwi` — reference-free QE with ``unbabel-comet`` (optional extra ``[comet]``);
* :func:`similarity` — cosine of source and translation with a multilingual encoder judge's
  ``embed(texts)`` (unit vectors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from harness.cache import CachedBackend, RequestCache
from harness.jsontypes import JSONObject
from harness.languages import LANGUAGES
from harness.qa.segments import Segment
from harness.scorers import ParseScore
from harness.tasks import PromptTemplate, TaskSpec
from harness.types import ChatMessage, GenerationConfig, Request

SOURCE = "xDial-Eval (Zhang et al., 2023), App. A Table 6 (MT evaluation prompt)"
COMET_DEFAULT = "Unbabel/wmt22-cometkiwi-da"
COMET_EXTRA = 'pip install -c constraints.txt -e ".[comet]"'
Progress = Callable[[int], None]


def _name(code: str) -> str:
    lit = LANGUAGES.get(code)
    return lit.name.capitalize() if lit else code


def adequacy_template(language: str, source_language: str = "en") -> PromptTemplate:
    """Table 6 with the target language's name (the paper's example is French)."""
    src, tgt = _name(source_language), _name(language)
    user = (
        f"Given the following {src} source sentence, evaluate the adequacy of the {tgt} translation on a scale of 1 "
        'to 5. Adequacy is defined as "to what extent the translated sentence preserves the semantic meaning of '
        'the source sentence"\n'
        f"{src} source sentence:\n{{reference}}\n{tgt} translation:\n{{response}}\n"
        "Provide your output in the format: adequacy: x where x is the corresponding numerical rating."
    )
    return PromptTemplate(name="xdial-mt-adequacy", user=user, source=SOURCE, language=language)


def adequacy_task(languages: Sequence[str], source_language: str = "en") -> TaskSpec:
    langs = tuple(dict.fromkeys(languages))
    return TaskSpec(
        name="translation-adequacy",
        description="LLM adequacy of a translation, 1-5 (xDial-Eval §3.2, App. A)",
        builder="xdial-eval",
        configs=("*",),
        level="turn",
        dimension="adequacy",
        languages=langs,
        templates={lang: adequacy_template(lang, source_language) for lang in langs},
        scorer=ParseScore(range=(1.0, 5.0)),
        generation=GenerationConfig(temperature=0.0, max_tokens=16),
    )


def adequacy(
    judge_spec: str,
    segments: Sequence[Segment],
    cache: RequestCache,
    *,
    source_language: str = "en",
    batch_size: int = 32,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[list[float | None], JSONObject]:
    """Adequacy score per segment (None = parse failure / invalid) and the judge's provenance."""
    from harness.judges import load_judge

    task = adequacy_task([s.language for s in segments] or ["en"], source_language)
    items = [
        {
            "id": f"{s.row_id}#{s.position}",
            "language": s.language,
            "context": [{"role": "user", "text": s.source}],
            "response": s.target,
            "reference": s.source,
        }
        for s in segments
    ]
    judge = load_judge(judge_spec, cache, seed=seed)
    scores: list[float | None] = []
    try:
        for i in range(0, len(items), batch_size):
            scores += [v.score if v.ok else None for v in judge.score(task, items[i : i + batch_size])]
            if progress:
                progress(len(items[i : i + batch_size]))
        scale = judge.score_range(task)
        info: JSONObject = {
            "spec": judge_spec,
            "identity": judge.identity(),
            "method": judge.method(task),
            "scale": None if scale is None else list(scale),
            "prompt": {**task.template_for(task.languages[0]).describe()},
        }
    finally:
        judge.close()
    return scores, info


BACK_TRANSLATION_PROMPT = (
    "Translate the following {language} text into {target}. Reply with the translation only.\n\n{text}"
)


def back_translate(
    translator_spec: str,
    segments: Sequence[Segment],
    cache: RequestCache,
    *,
    source_language: str = "en",
    progress: Progress | None = None,
    batch_size: int = 32,
) -> tuple[list[str], JSONObject]:
    """Back-translations of the segments' translations by an LLM (greedy, through the request cache)."""
    from harness.backends.base import create_backend
    from harness.spec import parse_spec

    spec = parse_spec(translator_spec)
    if spec.kind not in ("hf", "vllm", "openai", "replay"):
        raise ValueError(
            f"--translator {translator_spec!r}: needs a generative judge spec (hf, vllm, openai, replay)"
        )
    config = spec.generation_config(GenerationConfig(temperature=0.0, max_tokens=512))
    backend = create_backend(spec)
    cached = CachedBackend(backend, cache)
    out: list[str] = []
    try:
        for i in range(0, len(segments), batch_size):
            chunk = segments[i : i + batch_size]
            reqs = [
                Request(
                    (
                        ChatMessage(
                            "user",
                            BACK_TRANSLATION_PROMPT.format(
                                language=_name(s.language), target=_name(source_language), text=s.target
                            ),
                        ),
                    ),
                    config,
                )
                for s in chunk
            ]
            out += [r.text.strip() for r in cached.generate(reqs)]
            if progress:
                progress(len(chunk))
        info: JSONObject = {
            "spec": translator_spec,
            "identity": backend.identity(),
            "prompt": BACK_TRANSLATION_PROMPT,
            "decoding": config.to_dict(),
        }
    finally:
        backend.close()
    return out, info


def backtranslation_scores(
    sources: Sequence[str],
    back_translations: Sequence[str],
    languages: Sequence[str],
    *,
    bertscore_model: str | None = None,
    show_progress: bool = False,
) -> tuple[dict[str, list[float | None]], dict[str, dict[str, float]], JSONObject]:
    """Per segment: sentence chrF and BERTScore F1 of the back-translation vs the source; per
    language: corpus BLEU and chrF (sacreBLEU defaults: 13a tokenisation, chrF n=6, beta=2)."""
    import sacrebleu

    from harness.judges.refmetrics import bertscore_scores

    chrf = [
        float(sacrebleu.sentence_chrf(h, [r]).score) if h.strip() and r.strip() else None
        for h, r in zip(back_translations, sources, strict=True)
    ]
    bs = bertscore_scores(
        list(sources), list(back_translations), model=bertscore_model, show_progress=show_progress
    )
    corpus: dict[str, dict[str, float]] = {}
    for lang in dict.fromkeys(languages):
        idx = [i for i, lg in enumerate(languages) if lg == lang]
        hyp, ref = [back_translations[i] for i in idx], [sources[i] for i in idx]
        corpus[lang] = {
            "bleu": float(sacrebleu.corpus_bleu(hyp, [ref]).score),
            "chrf": float(sacrebleu.corpus_chrf(hyp, [ref]).score),
        }
    info: JSONObject = {
        "sacrebleu": sacrebleu.__version__,
        "bleu": "corpus_bleu, 13a tokenisation",
        "chrf": "chrF2 (n=6, beta=2)",
        "bertscore": {k: v for k, v in bs.info.items() if k in ("encoder", "num_layers", "fingerprint")},
    }
    return {"chrf": chrf, "bertscore_f1": bs.scores["bert_score_F1"]}, corpus, info


def cometkiwi(
    segments: Sequence[Segment],
    *,
    model: str = COMET_DEFAULT,
    batch_size: int = 16,
    gpus: int = 0,
    show_progress: bool = False,
) -> tuple[list[float], JSONObject]:
    """CometKiwi QE score per segment (``src`` = source, ``mt`` = translation) with ``unbabel-comet``.
    ``model``: a Hub id (downloaded once; the CometKiwi models are gated: accept the licence on the Hub
    and set ``HF_TOKEN``), a checkpoint ``.ckpt`` or a downloaded model directory."""
    try:
        from comet import download_model, load_from_checkpoint
    except ImportError as e:
        raise RuntimeError(f"CometKiwi needs the optional extra [comet]: {COMET_EXTRA} ({e})") from None
    p = Path(model)
    try:
        if p.is_file():
            path = str(p)
        elif p.is_dir():
            found = sorted(p.rglob("*.ckpt"))
            if not found:
                raise FileNotFoundError(f"no .ckpt checkpoint under {p}")
            path = str(found[0])
        else:
            path = download_model(model)
        qe = load_from_checkpoint(path)
    except Exception as e:  # offline, gated, missing token: one clear message with the way forward
        raise RuntimeError(
            f"could not load the CometKiwi model {model!r}: {type(e).__name__}: {e}. The Unbabel CometKiwi "
            "checkpoints are gated on the Hugging Face Hub: accept the licence on the model page, set HF_TOKEN and "
            "run once online, or pass --comet-model PATH to a downloaded checkpoint (.ckpt or its directory)"
        ) from None
    data = [{"src": s.source, "mt": s.target} for s in segments]
    out = qe.predict(data, batch_size=batch_size, gpus=gpus, progress_bar=show_progress)
    return [float(x) for x in out.scores], {"model": model, "checkpoint": path}


def similarity(
    encoder_spec: str,
    segments: Sequence[Segment],
    cache: RequestCache,
    *,
    progress: Progress | None = None,
    batch_size: int = 512,
) -> tuple[list[float], JSONObject]:
    """Cosine of the source and the translation (unit vectors from the encoder judge's ``embed``)."""
    from harness.judges import load_judge

    judge = load_judge(encoder_spec, cache)
    if not hasattr(judge, "embed"):
        judge.close()
        raise ValueError(
            f"--encoder {encoder_spec!r} is not an embedding judge (it has no embed(texts)); use embed:<model>"
        )
    out: list[float] = []
    try:
        for i in range(0, len(segments), batch_size):
            chunk = segments[i : i + batch_size]
            emb = judge.embed([t for s in chunk for t in (s.source, s.target)])
            out += [float(np.dot(emb[s.source], emb[s.target])) for s in chunk]
            if progress:
                progress(len(chunk))
        info: JSONObject = {"spec": encoder_spec, "identity": judge.identity()}
    finally:
        judge.close()
    return out, info
