"""MEEP engagingness judging as an `evaluate` module (Ferron et al., 2023), with Spearman / Pearson
correlations against human ratings.

A thin adapter over the dialeval-harness library (judge backends, request cache, the MEEP prompt
family of tasks/meep, harness.parsing.parse_scale_score, harness.meta.correlation):
    >>> import evaluate
    >>> m = evaluate.load("tasks/meep", "meep_sa")
    >>> m.compute(contexts=["Hi!\\nHiii! How are you?"], responses=["Great, I just got back from Peru!"],
    ...           judge="hf:Qwen/Qwen2.5-0.5B-Instruct")
"""

import datasets
import evaluate
import numpy as np

from harness.judges import judge_items
from harness.meta.correlation import correlation
from harness.meta.scale_correlation import bootstrap_ci
from harness.meta.scale_correlation import pearson as _pearson_fn
from harness.meta.scale_correlation import spearman as _spearman_fn
from tasks.meep import CONFIGS, MEEP_CITATION

_DESCRIPTION = """Engagingness of a dialogue response (turn level) or of a whole dialogue (dialogue level) judged by
an LLM with the MEEP prompt family (App. A Tables 7-11): Naive, human-directed (HD), MEEP, MEEP with
"such as" examples (SA), each with or without role assignment (+R, a system message), the Spanish /
Chinese translations of MEEP+SA (†), the dialogue-level MEEP+SA-DIAL, and the G-EVAL / GPTScore
baselines. Written scores are parsed from anywhere in the reply (0-100, or 1-3 for HD and G-EVAL);
a reply without a parsable on-scale score is None (counted, raw text kept), never 0. GPTScore is the
log-prob of "Yes" in the echoed "Answer: Yes." (hf / vllm judges only). With human ratings, Spearman
and Pearson correlations with p-values and bootstrap 95% confidence intervals are returned too."""

_KWARGS_DESCRIPTION = """
Configs: naive, naive_r, hd, hd_r, meep, meep_r, meep_sa, meep_sa_r, meep_sa_native, meep_sa_r_native,
geval, gptscore (turn level); meep_sa_dial, meep_sa_r_dial, geval_dial (dialogue level).
Inputs:
    turn level:     contexts (list of str: the context turns joined by "\\n", oldest first),
                    responses (list of str: the response to judge)
    dialogue level: dialogues (list of str: one "role: text" line per turn)
Keyword arguments:
    judge: judge spec string (hf:/vllm:/openai:/replay:...), required; e.g. "hf:<model>,max_tokens=1024"
    languages: ISO code per item ("en", "es", "zh"; dialogue level "en", "zh"), default "en" for all
    batch_size: items per judge call (default 32); cache_path: request-cache SQLite file (default: none)
    human: optional human engagingness rating per item (None = missing) to correlate with
    n_bootstrap: bootstrap resamples for the 95% CIs (default 1000; 0 = none); seed (default 0)
Returns:
    scores (list of float|None), mean, parse_failures, failures (index, status, detail), raw (judge
    outputs), prompt ({language: template name/source/version/hash}), and with human:
    correlations ({spearman, pearson: value, p_value, ci, n, n_missing}) and, for several languages,
    per_language ({language: {spearman, pearson}})
"""

_CORRELATIONS = (("spearman", _spearman_fn), ("pearson", _pearson_fn))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Meep(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIGS:
            raise KeyError(f"unknown config {self.config_name!r}: use one of {sorted(CONFIGS)}")
        if CONFIGS[self.config_name].level == "turn":
            features = {"contexts": datasets.Value("string"), "responses": datasets.Value("string")}
        else:
            features = {"dialogues": datasets.Value("string")}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=MEEP_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(features),
            homepage="https://github.com/PortNLP/MEEP",
        )

    def _compute(
        self,
        contexts=None,
        responses=None,
        dialogues=None,
        judge=None,
        languages=None,
        batch_size=32,
        cache_path=None,
        human=None,
        n_bootstrap=1000,
        seed=0,
    ):
        if not judge:
            raise ValueError("pass judge=<spec>, e.g. judge='hf:Qwen/Qwen2.5-0.5B-Instruct'")
        task = CONFIGS[self.config_name]
        n = len(contexts) if task.level == "turn" else len(dialogues)
        langs = ["en"] * n if languages is None else [str(x) for x in languages]
        if len(langs) != n:
            raise ValueError(f"languages has {len(langs)} entries for {n} items")
        unknown = sorted(set(langs) - set(task.languages))
        if unknown:
            raise ValueError(
                f"config {self.config_name!r} has no prompt for language(s) {unknown}; it covers {list(task.languages)}"
            )
        if human is not None and len(human) != n:
            raise ValueError(f"human has {len(human)} ratings for {n} items")
        items = []
        for i in range(n):
            item = {"id": str(i), "language": langs[i]}
            if task.level == "turn":
                item["context"] = _context_turns(contexts[i])
                item["response"] = responses[i]
            else:
                item["turns"] = _dialogue_turns(dialogues[i])
            items.append(item)
        verdicts = judge_items(judge, task, items, batch_size=batch_size, cache_path=cache_path, seed=seed)
        scores = [v.score if v.ok else None for v in verdicts]
        valid = [s for s in scores if s is not None]
        out = {
            "scores": scores,
            "mean": float(np.mean(valid)) if valid else None,
            "parse_failures": sum(s is None for s in scores),
            "failures": [
                {"index": i, "status": v.status, "detail": v.detail}
                for i, v in enumerate(verdicts)
                if not v.ok
            ],
            "raw": [v.raw for v in verdicts],
            "prompt": {lang: task.template_for(lang).describe() for lang in dict.fromkeys(langs)},
        }
        if human is not None:
            out["correlations"] = _correlations(scores, human, n_bootstrap, seed)
            if len(set(langs)) > 1:
                out["per_language"] = {
                    lang: _correlations(
                        [s for s, x in zip(scores, langs, strict=True) if x == lang],
                        [h for h, x in zip(human, langs, strict=True) if x == lang],
                        n_bootstrap,
                        seed,
                    )
                    for lang in dict.fromkeys(langs)
                }
        return out


def _correlations(scores, human, n_bootstrap, seed):
    """Spearman and Pearson (scipy, with p-values) over the items that have both a score and a human
    rating; ``n_missing`` counts the others (parse failures, missing ratings)."""
    pairs = [
        (float(s), float(h))
        for s, h in zip(scores, human, strict=True)
        if s is not None and h is not None and not np.isnan(float(h))
    ]
    x = np.array([p[0] for p in pairs], dtype=float)
    y = np.array([p[1] for p in pairs], dtype=float)
    out = {}
    for name, fn in _CORRELATIONS:
        est = correlation(x, y, name)
        if n_bootstrap and len(pairs) >= 3:
            est.ci = bootstrap_ci(fn, x, y, n_bootstrap=n_bootstrap, seed=seed)
        out[name] = {**est.to_dict(), "n_missing": len(scores) - len(pairs)}
    return out


def _context_turns(text):
    """Context turns, one per line, oldest first; the last one is the user's (roles alternate
    backwards from the judged response). Blank lines are dropped."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    n = len(lines)
    return [{"role": "user" if (n - 1 - k) % 2 == 0 else "assistant", "text": t} for k, t in enumerate(lines)]


def _dialogue_turns(text):
    """One turn per "role: text" line; a line without a role prefix takes the alternating role
    (user first)."""
    turns = []
    for k, line in enumerate(x for x in str(text).splitlines() if x.strip()):
        role, sep, rest = line.partition(":")
        if sep and role.strip() and len(role.strip()) <= 24 and "\n" not in role:
            turns.append({"role": role.strip(), "text": rest.strip()})
        else:
            turns.append({"role": "user" if k % 2 == 0 else "assistant", "text": line.strip()})
    return turns
