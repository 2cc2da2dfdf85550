"""What a reader of `harness report` sees at once: run labels, the alt-test figure's size
and legend, long judge names, tables wider than the page."""

from __future__ import annotations

from PIL import Image

from harness.report.build import dataset_label
from harness.report.figures import Doc
from harness.report.meta_figures import alt_test_figure, wrap_name


def test_a_run_built_from_source_is_not_labelled_twice():
    built = {"builder": "xdial-eval", "revision": "xdial-eval@1.1.0", "fingerprint": "87f666a0a3d43446abc"}
    assert dataset_label(built) == "xdial-eval@1.1.0 (87f666a0a3d4)"
    assert dataset_label({"builder": "medal", "revision": "1.0.0"}) == "medal@1.0.0"
    assert dataset_label({"builder": "upheld", "revision": "upheld@2.0.0"}) == "upheld@2.0.0"
    assert dataset_label({"location": "org/ds", "revision": None}, "t") == "org/ds@—"


def test_long_judge_names_wrap_and_keep_both_ends():
    panel = "panel:metric:rougeL+metric:bert_score_precision+metric:message_embedding_cos_sim"
    lines = wrap_name(panel).split("\n")
    assert "".join(lines) == panel and len(lines) <= 3
    assert lines[0].startswith("panel:") and lines[-1].endswith("message_embedding_cos_sim")
    assert wrap_name("metric:rougeL") == "metric:rougeL"
    many = "panel:" + "+".join(f"metric:m{i}" for i in range(30))
    assert "".join(wrap_name(many).split("\n")) == many and wrap_name(many).count("\n") <= 2


def test_alt_test_figure_of_80_annotator_bars_is_readable(tmp_path):
    per = [
        [
            "t",
            "judge",
            f"set{e}/{lang}",
            f"annotator_{a}",
            "40",
            f"{0.3 + 0.05 * a:.3f}",
            "0.01",
            "yes" if a > 3 else "no",
        ]
        for e in range(4)
        for lang in ("en", "zh", "de", "ar")
        for a in range(5)
    ]
    assert len(per) == 80
    path = alt_test_figure(per, tmp_path / "alt.png", "judge: ρ_j per annotator")
    w, h = Image.open(path).size
    assert w <= 1800 and h <= 1600 and w / h < 2.5  # a grid of panels, not a 5,446 × 402 strip


def test_html_tables_scroll_in_their_box_and_cis_wrap_whole(tmp_path):
    doc = Doc("t")
    doc.table(["judge", "en"], [["panel:metric:rougeL+metric:bert_score_precision", "0.532* [0.41, 0.63]"]])
    html = doc.to_html(tmp_path)
    assert '<div class="table-wrap"><table>' in html and "overflow-x: auto" in html
    assert '<td class="t">panel:metric:rougeL+metric:bert_score_precision</td>' in html
    assert '<td>0.532* <span class="ci">[0.41, 0.63]</span></td>' in html
