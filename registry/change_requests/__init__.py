"""Change requests: label moves of prompts and skills reviewed, tested, then applied as one release."""
