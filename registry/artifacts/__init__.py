"""Artifacts: what prompts and skills have in common, and the table of kinds that tells them apart."""
