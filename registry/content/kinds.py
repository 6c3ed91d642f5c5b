"""Content blocks by kind. Each kind is one class that knows, for its blocks, how they are stored
(bytes moved into blobs), which template they carry, how they render, what a diff compares, and their
wire shape in every protocol revision. ``KINDS`` is the one place where kinds are told apart.

Blocks travel as plain dicts in their stored shape (the 2025-11-25 schema, bytes referred to by
sha256 in ``blob``); rendered blocks carry the bytes inline (base64) instead. The kinds are stateless
singletons: ``kind_of(block).render(...)``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from registry.templates.mustache import Template

if TYPE_CHECKING:  # the pure layer reads a revision's flags, given by its callers
    from registry.revisions import Revision

Block = dict[str, Any]


class BlobSink(Protocol):
    """Where a version being written puts its bytes (see registry.prompts.preparing)."""

    def add_inline(self, encoded: str, mime_type: str, where: str) -> str:
        """Bytes given inline as base64: stored as a blob; returns its sha256 (hex)."""
        ...

    def add_reference(self, sha_hex: str, where: str) -> str:
        """A blob named by sha256: must exist in the tenant; returns the sha256 (hex)."""
        ...


def _annotations(revision: Revision, annotations: dict[str, Any] | None) -> dict[str, Any] | None:
    if not annotations:
        return None
    shaped = {k: v for k, v in annotations.items() if k in ("audience", "priority")}
    if "lastModified" in annotations and revision.links:
        shaped["lastModified"] = annotations["lastModified"]
    return shaped or None


class Kind:
    """What every kind answers; the defaults fit a block with no template and no bytes."""

    type: ClassVar[str]
    # Where inline base64 goes in the bytes holder: ``data`` (image, audio) or ``blob`` (resource).
    inline_field: ClassVar[str] = "data"

    # --- storage --------------------------------------------------------------------------------

    def store(self, block: Block, where: str, blobs: BlobSink) -> str | None:
        """Turn a submitted block (dumped from its input model) into its stored shape, in place;
        returns the sha256 (hex) of the blob it refers to, if any."""
        return None

    def template(self, block: Block) -> tuple[str, str] | None:
        """(field path, source) of the Mustache template the block carries, if any."""
        return None

    def uri(self, block: Block) -> tuple[str, str] | None:
        """(field path, value) of the URI the block names, if it names one: a literal, or a
        Mustache template over the prompt's arguments."""
        return None

    def with_uri(self, block: Block, uri: str) -> Block:
        """A rendered block with its URI replaced by ``uri``."""
        raise NotImplementedError

    def blob(self, block: Block) -> str | None:
        """The sha256 (hex) of the blob a stored block refers to, if any."""
        return None

    def bytes_holder(self, block: Block) -> Block | None:
        """The mapping that holds the block's bytes (``data``/``blob``/``mimeType``), if it has any:
        the block itself, or its embedded resource."""
        return None

    # --- rendering ------------------------------------------------------------------------------

    def render(
        self,
        block: Block,
        template: Template | None,
        values: Mapping[str, str],
        blobs: Mapping[bytes, str],
    ) -> Block:
        """The block with its template rendered and its bytes inline (base64)."""
        return dict(block)

    # --- reading --------------------------------------------------------------------------------

    def text(self, block: Block) -> str:
        """What a diff compares, line by line."""
        return json.dumps(block, sort_keys=True, indent=1)

    # --- the wire -------------------------------------------------------------------------------

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        """A rendered block shaped for ``revision``: only fields it defines, and content it cannot
        carry converted (never dropped)."""
        raise NotImplementedError

    def _common(self, revision: Revision, block: Block, shaped: Block) -> Block:
        annotations = _annotations(revision, block.get("annotations"))
        if annotations:
            shaped["annotations"] = annotations
        if "_meta" in block and revision.links:
            shaped["_meta"] = block["_meta"]
        return shaped


class Text(Kind):
    type = "text"

    def template(self, block: Block) -> tuple[str, str] | None:
        return "text", block["text"]

    def render(
        self,
        block: Block,
        template: Template | None,
        values: Mapping[str, str],
        blobs: Mapping[bytes, str],
    ) -> Block:
        assert template is not None
        out = dict(block)
        out["text"] = template.render(values)
        return out

    def text(self, block: Block) -> str:
        return str(block["text"])

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        return self._common(revision, block, {"type": "text", "text": block["text"]})


class _Binary(Kind):
    """Image and audio: bytes with a media type."""

    def store(self, block: Block, where: str, blobs: BlobSink) -> str | None:
        if "data" in block:
            sha = blobs.add_inline(block.pop("data"), block["mimeType"], f"{where}.data")
        else:
            sha = blobs.add_reference(block["blob"], f"{where}.blob")
        block["blob"] = sha
        return sha

    def blob(self, block: Block) -> str | None:
        return str(block["blob"])

    def bytes_holder(self, block: Block) -> Block | None:
        return block

    def render(
        self,
        block: Block,
        template: Template | None,
        values: Mapping[str, str],
        blobs: Mapping[bytes, str],
    ) -> Block:
        out = dict(block)
        out["data"] = blobs[bytes.fromhex(out.pop("blob"))]
        return out

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        shaped = {"type": self.type, "data": block["data"], "mimeType": block["mimeType"]}
        return self._common(revision, block, shaped)


class Image(_Binary):
    type = "image"


class Audio(_Binary):
    type = "audio"

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        if revision.audio:
            return super().wire(revision, block, tenant_slug)
        # Before audio existed: an embedded resource with the same bytes.
        sha = hashlib.sha256(base64.b64decode(block["data"])).hexdigest()
        resource = {
            "uri": f"registry://{tenant_slug}/blobs/{sha}",
            "mimeType": block["mimeType"],
            "blob": block["data"],
        }
        return self._common(revision, block, {"type": "resource", "resource": resource})


class Resource(Kind):
    """An embedded resource: a text template or bytes, under a URI."""

    type = "resource"
    inline_field = "blob"

    def store(self, block: Block, where: str, blobs: BlobSink) -> str | None:
        resource = block["resource"]
        if "text" in resource:
            return None
        if _is_sha256(resource["blob"]):
            return blobs.add_reference(resource["blob"], f"{where}.resource.blob")
        mime = resource.get("mimeType", "application/octet-stream")
        resource["blob"] = blobs.add_inline(resource["blob"], mime, f"{where}.resource.blob")
        return str(resource["blob"])

    def template(self, block: Block) -> tuple[str, str] | None:
        resource = block["resource"]
        return ("resource.text", resource["text"]) if "text" in resource else None

    def uri(self, block: Block) -> tuple[str, str] | None:
        return "resource.uri", block["resource"]["uri"]

    def with_uri(self, block: Block, uri: str) -> Block:
        return {**block, "resource": {**block["resource"], "uri": uri}}

    def blob(self, block: Block) -> str | None:
        resource = block["resource"]
        return None if "text" in resource else str(resource["blob"])

    def bytes_holder(self, block: Block) -> Block | None:
        resource = block.get("resource")
        return resource if isinstance(resource, dict) else None

    def render(
        self,
        block: Block,
        template: Template | None,
        values: Mapping[str, str],
        blobs: Mapping[bytes, str],
    ) -> Block:
        out = dict(block)
        resource = dict(out["resource"])
        if template is not None:
            resource["text"] = template.render(values)
        else:
            resource["blob"] = blobs[bytes.fromhex(resource["blob"])]
        out["resource"] = resource
        return out

    def text(self, block: Block) -> str:
        resource = block["resource"]
        return str(resource["text"]) if "text" in resource else super().text(block)

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        resource = block["resource"]
        contents = {k: resource[k] for k in ("uri", "mimeType", "text", "blob") if k in resource}
        if "_meta" in resource and revision.links:
            contents["_meta"] = resource["_meta"]
        return self._common(revision, block, {"type": "resource", "resource": contents})


class ResourceLink(Kind):
    type = "resource_link"

    def uri(self, block: Block) -> tuple[str, str] | None:
        return "uri", block["uri"]

    def with_uri(self, block: Block, uri: str) -> Block:
        return {**block, "uri": uri}

    def wire(self, revision: Revision, block: Block, tenant_slug: str) -> Block:
        if revision.links:
            keys = ["uri", "name", "title", "description", "mimeType", "size"]
            if revision.icons:
                keys.append("icons")
            shaped = {"type": "resource_link", **{k: block[k] for k in keys if k in block}}
            return self._common(revision, block, shaped)
        # Before links existed: text naming the URI.
        label = block.get("title") or block["name"]
        text = f"{label}: {block['uri']}" + (
            f"\n{block['description']}" if block.get("description") else ""
        )
        return self._common(revision, block, {"type": "text", "text": text})


KINDS: dict[str, Kind] = {
    kind.type: kind for kind in (Text(), Image(), Audio(), Resource(), ResourceLink())
}


def kind_of(block: Block) -> Kind:
    """The kind of a stored or rendered block (its ``type`` was checked when it was written)."""
    return KINDS[block["type"]]


def _is_sha256(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
