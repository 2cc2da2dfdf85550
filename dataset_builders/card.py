"""Dataset cards (README.md with YAML front matter) for built dataset directories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from dataset_builders.card_stats import config_statistics, label_type
from dataset_builders.helpers import LANGUAGES, size_category
from dataset_builders.records import ConfigData
from harness.data.cells import card_section
from harness.data.layout import SPLIT, data_file
from harness.data.schema import COLUMN_DOCS, FEATURES_BY_LEVEL, LEVELS, dimension_table

if TYPE_CHECKING:
    from dataset_builders.base import Builder


def render_card(
    self: Builder, configs: list[ConfigData], languages: tuple[str, ...], manifest: dict[str, Any]
) -> str:
    """README.md of a built dataset: YAML front matter (configs, license, languages, features)
    and a Markdown body (schema, per-config statistics with sample rows, provenance, citation)."""
    total = sum(c.rows for c in configs)
    present = {lang for c in configs for lang in c.languages}
    langs_written = [lang for lang in LANGUAGES if lang in present] + sorted(present - set(LANGUAGES))
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
                "features": c.arrow_features._to_yaml_list(),
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
    release = manifest.get("release")
    if release:
        out += [
            f"**Version {release['version']}** of `{release['name']}` in the dialeval-harness dataset registry "
            f"(registered {release['registered_at']}; versions are immutable).",
            "",
        ]
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
        out.append(f"| `{c.name}` | {c.level} | {c.rows} | {c.instances} | {exp} | {' '.join(c.languages)} |")
    out.append("")

    out += ["## Schema", ""]
    out += [
        "The common dialogue-evaluation schema of dialeval-harness (`harness/data/schema.py`).",
        "",
    ]
    for level in LEVELS:
        if not any(c.level == level for c in configs):
            continue
        out += [
            f"### {level.capitalize()}-level configs",
            "",
            "| column | type | description |",
            "|---|---|---|",
        ]
        for name, feat in FEATURES_BY_LEVEL[level].items():
            out.append(f"| `{name}` | {label_type(feat)} | {COLUMN_DOCS.get(name, '')} |")
        out.append("")
    groups: dict[tuple[str, ...], list[ConfigData]] = {}
    for c in configs:
        common = FEATURES_BY_LEVEL.get(c.level, {})
        if c.features is not None and (extra := tuple(k for k in c.arrow_features if k not in common)):
            groups.setdefault(extra, []).append(c)
    for extra, cs in groups.items():
        title = "Columns" if cs[0].level not in FEATURES_BY_LEVEL else "Extra columns"
        names = ", ".join(f"`{c.name}`" for c in cs)
        out += [f"### {title} of {names}", "", "| column | type | description |", "|---|---|---|"]
        feats = cs[0].arrow_features
        out += [f"| `{k}` | {label_type(feats[k])} | {cs[0].column_docs.get(k, '')} |" for k in extra]
        out.append("")
    out += [
        "Roles are `user` (the human) and `assistant` (the chatbot). Where the source does not mark "
        "speakers the roles are **inferred**: dialogue turns alternate starting with `user`; at turn "
        "level the response is the `assistant`'s and the context alternates backwards from it "
        "(the last context utterance is `user`).",
        "",
    ]
    if self.dimensions:
        out += ["### Dimensions", "", dimension_table(self.dimensions), ""]

    out += ["## Statistics", ""]
    for c in configs:
        out += [f"### `{c.name}`" + (f" ({c.title})" if c.title else ""), ""]
        out += config_statistics(c, self.dimensions)
    out += self.card_sections(configs, languages)

    out += ["## Provenance", ""]
    out += ["| config | file | source | sha256 | bytes |", "|---|---|---|---|---:|"]
    for i in manifest["inputs"]:
        out.append(f"| `{i['config']}` | {i['file']} | {i['source']} | `{i['sha256']}` | {i['size']} |")
    out.append("")
    skipped = manifest.get("skipped") or {}
    if skipped.get("count"):
        out += [
            f"### Skipped source rows: {skipped['count']}",
            "",
            "Built with `--skip-invalid`; every skipped row is listed in `build_manifest.json`:",
            "",
        ]
        out += [
            f"- {r['file']} row {r['row']}, `{r['field']}`: {_md_escape(r['problem'])}"
            for r in skipped["rows"][:20]
        ]
        out.append("")
    out += card_section(manifest.get("odd_cells") or {})
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
