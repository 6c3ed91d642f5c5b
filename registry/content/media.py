"""What bytes declared as an image must look like: the signature of each image type the registry
takes. Bytes that do not match their declared type are refused when they are written, so nothing
served back as an image is anything else (an HTML page named image/png, say)."""

from __future__ import annotations

from collections.abc import Callable

from registry.errors import InvalidInput


def _svg(data: bytes) -> bool:
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return head.startswith((b"<svg", b"<?xml", b"<!--", b"<!doctype svg")) and b"<svg" in head


_SIGNATURES: dict[str, Callable[[bytes], bool]] = {
    "image/png": lambda d: d.startswith(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": lambda d: d.startswith(b"\xff\xd8\xff"),
    "image/gif": lambda d: d.startswith((b"GIF87a", b"GIF89a")),
    "image/webp": lambda d: d[:4] == b"RIFF" and d[8:12] == b"WEBP",
    "image/avif": lambda d: d[4:8] == b"ftyp" and d[8:12] in (b"avif", b"avis"),
    "image/bmp": lambda d: d.startswith(b"BM"),
    "image/x-icon": lambda d: d.startswith(b"\x00\x00\x01\x00"),
    "image/vnd.microsoft.icon": lambda d: d.startswith(b"\x00\x00\x01\x00"),
    "image/svg+xml": _svg,
}
IMAGE_TYPES = tuple(_SIGNATURES)


def check_media(data: bytes, mime_type: str, where: str) -> None:
    """Refuse bytes declared as an image that are not one of that type (422 naming ``where``)."""
    kind = mime_type.lower()
    if not kind.startswith("image/"):
        return
    check = _SIGNATURES.get(kind)
    if check is None:
        raise InvalidInput(
            f"{where}: images are taken as {', '.join(IMAGE_TYPES)}, not {mime_type}",
            field=where,
        )
    if not check(data):
        raise InvalidInput(f"{where}: the bytes are not of type {mime_type}", field=where)


def inline_disposition(mime_type: str) -> bool:
    """Whether a blob may be shown in place (images, audio) rather than only downloaded."""
    return mime_type.lower().startswith(("image/", "audio/"))
