"""``python -m harness.cli …``."""

from harness.cli.app import main

main()
