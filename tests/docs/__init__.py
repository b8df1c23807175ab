"""The README, docs/ and examples/ checked against what the code does."""
