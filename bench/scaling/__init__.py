"""Benchmarks of harness at scale: memory and time per item as the item count grows (run with python bench/scaling/SCRIPT.py)."""
