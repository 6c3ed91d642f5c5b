"""Prompts, their immutable versions, labels and blobs."""
