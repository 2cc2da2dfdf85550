"""SmolLM2-135M-Instruct through every LLM path (docs/smollm2.md): real OpenAI-compatible servers
(:mod:`bench.smollm2.server`), the judge on the shared data and backend agreement
(:mod:`bench.smollm2.judge`), the MEDAL pipeline (:mod:`bench.smollm2.medal`), LoRA evaluator and SFT
chatbot (:mod:`bench.smollm2.lora`)."""
