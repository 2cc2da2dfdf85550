"""The MEDAL pipeline (Mendonça, Lavie and Trancoso, §3–5): seed contexts → multi-agent multilingual
dialogues → automatic labels → malformed-dialogue detection → statistics → balanced curation →
human-annotation round trip → one versioned dataset.

Run it with ``harness datasets build medal --config medal.yaml`` (see docs/medal-pipeline.md).
"""
