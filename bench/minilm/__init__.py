"""Benches of the MiniLM evaluators (the English trained-vs-zero-shot table)."""
