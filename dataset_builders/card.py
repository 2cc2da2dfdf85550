"""Dataset cards (README.md with YAML front matter) for built dataset directories."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml

from dataset_builders.base import (
    FEATURES_BY_LEVEL,
    LANGUAGES,
    LEVELS,
    SPLIT,
    ConfigData,
    data_file,
    size_category,
)

if TYPE_CHECKING:
    from dataset_builders.base import Builder

_SCHEMA_DOC: dict[str, list[tuple[str, str, str]]] = {
    "turn": [
        ("id", "string", "unique row id `<dataset>-<item>-<language>`"),
        ("item_id", "string", "same for all translations of one item"),
        ("dataset", "string", "config name"),
        ("language", "string", "ISO 639-1 code"),
        ("level", "string", '`"turn"`'),
        ("context", "list of {role: string, text: string}", "dialogue history, oldest first"),
        ("response", "string", "the rated response (role `assistant`)"),
        ("rating", "float64", "mean human rating"),
        ("dimension", "string", "rated quality aspect"),
    ],
    "dialogue": [
        ("id", "string", "unique row id `<dataset>-<item>-<language>`"),
        ("item_id", "string", "same for all translations of one item"),
        ("dataset", "string", "config name"),
        ("language", "string", "ISO 639-1 code"),
        ("level", "string", '`"dialogue"`'),
        ("turns", "list of {role: string, text: string}", "the whole dialogue, first utterance first"),
        ("rating", "float64", "mean human rating"),
        ("dimension", "string", "rated quality aspect"),
    ],
}


def render_card(
    self: Builder, configs: list[ConfigData], languages: tuple[str, ...], manifest: dict[str, Any]
) -> str:
    """README.md of a built dataset: YAML front matter (configs, license, languages, features)
and a Markdown body (schema, per-config statistics with sample rows, provenance, citation)."""
    total = sum(c.rows for c in configs)
    langs_written = [lang for lang in LANGUAGES if any(lang in c.languages for c in configs)]
    front: dict[str, Any] = {
        "pretty_name": self.pretty_name or self.name,
        "license": self.license.lower(),
        "language": langs_written or list(languages),
        "multilinguality": "multilingual" if len(langs_written) > 1 else "monolingual",
        "task_categories": ["text-classification"],
        "tags": list(self.tags),
        "size_categories": [size_category(total)],
        "configs": [
            {"config_name": c.name, "data_files": [{"split": SPLIT, "path": data_file(c.name)}]}
            for c in configs
        ],
        "dataset_info": [
            {
                "config_name": c.name,
                "features": FEATURES_BY_LEVEL[c.level]._to_yaml_list(),
                "splits": [{"name": SPLIT, "num_bytes": c.num_bytes, "num_examples": c.rows}],
            }
            for c in configs
        ],
    }
    yaml_text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)

    out: list[str] = ["---", yaml_text.rstrip("\n"), "---", ""]
    out += [f"# {self.pretty_name or self.name}", ""]
    if self.description:
        out += [self.description.strip(), ""]
    out += [
        f"Built by the `{self.name}` builder v{self.version} of dialeval-harness "
        f"(fingerprint `{manifest['fingerprint'][:16]}`, {manifest['created_at']}).",
        "",
        "```python",
        "import datasets",
        f'ds = datasets.load_dataset("path/to/this/directory", "{configs[0].name}", split="{SPLIT}")',
        "```",
        "",
        "## Configs",
        "",
        "| config | level | rows | instances | expected instances | languages |",
        "|---|---|---:|---:|---:|---|",
    ]
    for c in configs:
        exp = "—" if c.expected_instances is None else str(c.expected_instances)
        out.append(
            f"| `{c.name}` | {c.level} | {c.rows} | {c.instances} | {exp} | {' '.join(c.languages)} |"
        )
    out.append("")

    out += ["## Schema", ""]
    for level in LEVELS:
        if not any(c.level == level for c in configs):
            continue
        dims = sorted({r["dimension"] for c in configs if c.level == level for r in c.records[:1]})
        out += [
            f"### {level.capitalize()}-level configs",
            "",
            "| column | type | description |",
            "|---|---|---|",
        ]
        out += [f"| `{n}` | {t} | {d} |" for n, t, d in _SCHEMA_DOC[level]]
        out += ["", f"`dimension` is {', '.join(f'`{d}`' for d in dims) or '—'} for these configs.", ""]
    out += [
        "Roles are `user` (the human) and `assistant` (the chatbot). Where the source does not mark "
        "speakers the roles are **inferred**: dialogue turns alternate starting with `user`; at turn "
        "level the response is the `assistant`'s and the context alternates backwards from it "
        "(the last context utterance is `user`).",
        "",
    ]

    out += ["## Statistics", ""]
    for c in configs:
        out += [f"### `{c.name}`" + (f" ({c.title})" if c.title else ""), ""]
        out += _config_stats(c)
    out += self.card_sections(configs, languages)

    out += ["## Provenance", ""]
    out += ["| config | file | source | sha256 | bytes |", "|---|---|---|---|---:|"]
    for i in manifest["inputs"]:
        out.append(f"| `{i['config']}` | {i['file']} | {i['source']} | `{i['sha256']}` | {i['size']} |")
    out.append("")
    if manifest["warnings"]:
        out += ["### Build warnings", ""]
        out += [f"- {_md_escape(w)}" for w in manifest["warnings"]]
        out.append("")
    out += ["Full details: `build_manifest.json`.", ""]

    out += [
        "## License",
        "",
        f"`{self.license}`." + (f" {self.license_note()}" if self.license_note() else ""),
        "",
    ]
    if self.homepage:
        out += ["## Homepage", "", self.homepage, ""]
    if self.citation:
        out += ["## Citation", "", "```bibtex", self.citation.strip(), "```", ""]
    return "\n".join(out)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _truncate(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _config_stats(c: ConfigData) -> list[str]:
    ratings: dict[str, float] = {}
    for r in c.records:
        ratings.setdefault(r["item_id"], r["rating"])
    vals = list(ratings.values())
    per_lang: dict[str, int] = {}
    for r in c.records:
        per_lang[r["language"]] = per_lang.get(r["language"], 0) + 1
    out = [
        f"- rows: {c.rows} ({c.instances} instances × {len(per_lang)} languages)",
        "- rows per language: " + ", ".join(f"{lang} {per_lang[lang]}" for lang in c.languages),
    ]
    if vals:
        mean = sum(vals) / len(vals)
        out.append(f"- rating (per instance): mean {mean:.3f}, min {min(vals):g}, max {max(vals):g}")
    if c.level == "turn" and c.records:
        mean_ctx = sum(len(r["context"]) for r in c.records) / c.rows
        out.append(f"- context utterances per row: mean {mean_ctx:.2f}")
    elif c.records:
        mean_turns = sum(len(r["turns"]) for r in c.records) / c.rows
        out.append(f"- utterances per dialogue: mean {mean_turns:.2f}")
    out.append("")
    sample_lang = "en" if "en" in per_lang else (c.languages[0] if c.languages else None)
    samples = [r for r in c.records if r["language"] == sample_lang][:2]
    if samples:
        out += ["Sample rows (long texts truncated):", "", "```json"]
        for r in samples:
            s = dict(r)
            for key in ("context", "turns"):
                if key in s:
                    msgs = s[key]
                    shown = [{"role": m["role"], "text": _truncate(m["text"], 100)} for m in msgs[-4:]]
                    if len(msgs) > 4:
                        shown.insert(0, {"role": "…", "text": f"({len(msgs) - 4} earlier utterances)"})
                    s[key] = shown
            if "response" in s:
                s["response"] = _truncate(s["response"])
            out.append(json.dumps(s, ensure_ascii=False))
        out += ["```", ""]
    return out
