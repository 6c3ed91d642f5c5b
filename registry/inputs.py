"""The base of every input model: unknown fields refused, and no NUL characters anywhere (PostgreSQL
text cannot hold them, and they have no business in a prompt)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from registry.naming import find_nul


class StrictInput(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        where = find_nul(data)
        if where:
            raise ValueError(f"{where}: text may not contain NUL (\\u0000) characters")
        return data
