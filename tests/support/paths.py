"""Where the repository is, for tests that read its committed files or run its commands.

Test modules sit at different depths under tests/; naming the root once here keeps each of them
free of `Path(__file__).parents[n]` arithmetic that breaks when a file moves.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "generated"
SUPPORT = ROOT / "tests" / "support"
