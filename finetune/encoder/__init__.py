"""Encoder evaluators' model side: :mod:`finetune.encoder.model` (the scorer — encoder + LoRA + head —,
its input encoding and saved artifact format) and :mod:`finetune.encoder.frozen` (a frozen lower
stack whose outputs are computed once and cached, so training runs only the adapted top layers)."""
