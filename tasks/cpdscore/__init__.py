"""CPDScore (ComperDial, Wakaki et al. 2024, App. B): LLM-judged humanness of responses.

:mod:`~tasks.cpdscore.prompts` (Simple / Detail, with and without reference, the two-step dialogue
score), :mod:`~tasks.cpdscore.scoring` (three seeded calls averaged, turn / dialogue / system
correlations) and the `evaluate` module ``tasks/cpdscore/cpdscore.py``.
"""
