"""Fine-tuning of lightweight evaluators and chatbots (LoRA/PEFT + accelerate); see docs/finetuning.md.

* :mod:`finetune.trainer` — the one accelerate training loop (checkpoints, exact resume, logging);
* :mod:`finetune.data` — self-supervised, distilled and supervised training data, registered as
  dataset versions;
* :mod:`finetune.discriminative` — sentence encoder + LoRA + head evaluators (``evaluator:<dir>``);
* :mod:`finetune.generative` — causal LM + LoRA P(Yes) evaluators (``hf:<base>,adapter=<dir>``);
* :mod:`finetune.lora` — LoRA on a causal LM and the adapter directory (generative evaluators, SFT);
* :mod:`finetune.sft` — chatbot SFT with the loss on assistant turns only;
* :mod:`finetune.recipe` — ``harness finetune evaluator --config`` (data → version → model → card);
* :mod:`finetune.cards` — Hugging Face model cards from adapter metadata and harness results.
"""
