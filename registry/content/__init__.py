"""Content blocks: the input models (``schemas``) and one class per kind (``kinds``) that knows the
kind's storage, rendering and wire shape per protocol revision. Pure: no I/O."""
