"""The serve ledger: who got which version of each prompt and skill, counted where answers are
made (``ledger``), written in batches, and asked (``service``)."""
