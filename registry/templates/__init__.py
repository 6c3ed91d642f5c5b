"""Mustache templates: parsing, validation and rendering (pure, no I/O)."""
