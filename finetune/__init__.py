"""Fine-tuning of lightweight evaluators and chatbots (LoRA/PEFT + accelerate).

Not built yet: this package is reserved by the project layout. Trained evaluators will come back
into the harness as judges (``hf:<base>,adapter=<path>``), which the hf backend already supports.
"""
