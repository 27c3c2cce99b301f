"""What a host shows of a tool beside its name and schemas: a title, annotations, icons, `_meta`.

A library user's own tool declares them in a `Display` (`Tool(display=...)`), checked when it is
made (a bad one is a `ValueError`). An upstream's are read with `display_from_listing`, which
neutralises rather than refuses, so that a tool is never lost for the sake of its decoration:

- text a host shows (the title, annotations' title) has every control, format (bidi overrides
  and isolates among them), surrogate or line/paragraph separator character replaced by U+FFFD
  (ZWJ and ZWNJ kept: emoji and scripts need them), and is cut at `MAX_TITLE_CHARS`;
- annotations keep MCP's four hints (booleans) and title; any other member is dropped;
- an icon is kept only with an `https:` URL (no credentials in it, at most `MAX_ICON_URL_CHARS`)
  or a `data:image/...;base64,` URI with well-formed base64 (at most `MAX_ICON_DATA_CHARS`), a
  mimeType (if given) `image/...`, sizes `WxH` or `any` (at most `MAX_ICON_SIZES`), a theme
  `light` or `dark`; at most `MAX_ICONS` are kept;
- `_meta` is kept when it is an object whose keys follow MCP's `_meta` key syntax and that
  writes in at most `MAX_META_BYTES` of JSON; otherwise dropped whole.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal
from urllib.parse import urlsplit

from strictcall.errors import JSONValue

MAX_TITLE_CHARS: Final = 128
"""The most characters of a title (the tool's, or its annotations'); an upstream's longer one is
cut there."""

MAX_ICONS: Final = 8
"""The most icons a tool lists; an upstream's further ones are dropped."""

MAX_ICON_URL_CHARS: Final = 2048
"""The longest `https:` icon URL kept."""

MAX_ICON_DATA_CHARS: Final = 65536
"""The longest `data:` icon URI kept (about 48 KiB of image)."""

MAX_ICON_SIZES: Final = 8
"""The most entries of an icon's `sizes`."""

MAX_META_BYTES: Final = 16384
"""The most bytes of a tool's `_meta` written as compact JSON; a larger one is dropped."""

Theme = Literal["light", "dark"]

_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_KEPT_FORMAT: Final = frozenset({"\u200c", "\u200d"})
_UNSAFE: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SIZE: Final = re.compile(r"(?:[1-9][0-9]{0,4}x[1-9][0-9]{0,4}|any)")
_MIME: Final = re.compile(r"image/[A-Za-z0-9][A-Za-z0-9.+-]{0,63}")
_DATA: Final = re.compile(r"data:(image/[A-Za-z0-9][A-Za-z0-9.+-]{0,63});base64,([A-Za-z0-9+/=]*)")
_LABEL: Final = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY: Final = re.compile(
    rf"(?:{_LABEL}(?:\.{_LABEL})*/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
)
"""MCP's `_meta` key: an optional prefix (dot-separated labels, then a slash) and a name that
begins and ends with a letter or digit."""


@dataclass(frozen=True, slots=True)
class Annotations:
    """MCP's tool annotations: hints to the host (None: not said, the host assumes MCP's
    default: not read-only, destructive, not idempotent, open world)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None

    def __post_init__(self) -> None:
        _check_title(self.title, "an annotations' title")
        for hint in self._hints():
            if hint is not None and type(hint) is not bool:
                raise ValueError("an annotation hint is True, False or None")

    def _hints(self) -> tuple[bool | None, ...]:
        return (
            self.read_only_hint,
            self.destructive_hint,
            self.idempotent_hint,
            self.open_world_hint,
        )

    def listed(self) -> dict[str, JSONValue]:
        """The annotations as MCP lists them (only those said)."""
        out: dict[str, JSONValue] = {} if self.title is None else {"title": self.title}
        for key, hint in zip(_HINTS, self._hints(), strict=True):
            if hint is not None:
                out[key] = hint
        return out


@dataclass(frozen=True, slots=True)
class Icon:
    """An icon a host may show for a tool: an `https:` URL or a `data:image/...;base64,` URI."""

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] | None = None
    theme: Theme | None = None

    def __post_init__(self) -> None:
        if icon_problem(self.src, self.mime_type, self.sizes, self.theme) is not None:
            raise ValueError(f"an icon is not one hosts may show ({icon_rules()})")

    def listed(self) -> dict[str, JSONValue]:
        """The icon as MCP lists it."""
        out: dict[str, JSONValue] = {"src": self.src}
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        if self.sizes is not None:
            out["sizes"] = list(self.sizes)
        if self.theme is not None:
            out["theme"] = self.theme
        return out


@dataclass(frozen=True, slots=True)
class Display:
    """A tool's title, annotations, icons and `_meta`, as MCP lists them beside its schemas
    (None: not listed; an empty icons tuple is listed as `[]`)."""

    title: str | None = None
    annotations: Annotations | None = None
    icons: tuple[Icon, ...] | None = None
    meta: Mapping[str, JSONValue] | None = None

    def __post_init__(self) -> None:
        _check_title(self.title, "a title")
        if self.icons is not None and len(self.icons) > MAX_ICONS:
            raise ValueError(f"a tool lists at most {MAX_ICONS} icons")
        if self.meta is not None:
            if meta_problem(self.meta) is not None:
                raise ValueError(
                    f"a tool's _meta is an object of MCP _meta keys, at most {MAX_META_BYTES}"
                    " bytes of JSON"
                )
            object.__setattr__(self, "meta", MappingProxyType(json.loads(json.dumps(self.meta))))

    def listed(self) -> dict[str, JSONValue]:
        """The members MCP's tools/list gives a tool for this display (only those set)."""
        out: dict[str, JSONValue] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.icons is not None:
            out["icons"] = [icon.listed() for icon in self.icons]
        if self.annotations is not None:
            out["annotations"] = self.annotations.listed()
        if self.meta is not None:
            out["_meta"] = json.loads(json.dumps(dict(self.meta)))
        return out


def neutral_text(text: str) -> str:
    """`text` safe to show in a host or terminal: each control, format, surrogate or separator
    character (but ZWJ and ZWNJ) as U+FFFD, cut at `MAX_TITLE_CHARS`."""
    cut = text[:MAX_TITLE_CHARS]
    if cut.isprintable():
        return cut
    return "".join("\ufffd" if _unsafe(char) else char for char in cut)


def display_from_listing(listed: Mapping[str, object]) -> Display:
    """The display of a tool as an upstream listed it (MCP's JSON members), neutralised (see the
    module's docstring): what cannot be kept is left out, never refused."""
    title = listed.get("title")
    annotations = listed.get("annotations")
    icons = listed.get("icons")
    meta = listed.get("_meta")
    return Display(
        title=neutral_text(title) if isinstance(title, str) else None,
        annotations=_annotations_of(annotations) if isinstance(annotations, Mapping) else None,
        icons=_icons_of(icons) if isinstance(icons, list) else None,
        meta=dict(meta) if isinstance(meta, Mapping) and meta_problem(meta) is None else None,
    )


def icon_problem(
    src: object, mime_type: object, sizes: object, theme: object
) -> Literal["src", "mimeType", "sizes", "theme"] | None:
    """The member that keeps an icon from being shown (see the module's docstring), or None."""
    if type(src) is not str or not _src_ok(src):
        return "src"
    if mime_type is not None and (type(mime_type) is not str or not _MIME.fullmatch(mime_type)):
        return "mimeType"
    if sizes is not None:
        if not isinstance(sizes, list | tuple) or len(sizes) > MAX_ICON_SIZES:
            return "sizes"
        if not all(type(size) is str and _SIZE.fullmatch(size) for size in sizes):
            return "sizes"
    if theme is not None and theme not in ("light", "dark"):
        return "theme"
    return None


def icon_rules() -> str:
    """The rules an icon meets, in one phrase."""
    return (
        f"an https URL of at most {MAX_ICON_URL_CHARS} characters without credentials, or a"
        f" data:image/...;base64 URI of at most {MAX_ICON_DATA_CHARS}; mimeType image/...;"
        f" at most {MAX_ICON_SIZES} sizes WxH or any; theme light or dark"
    )


def meta_problem(meta: Mapping[str, object]) -> str | None:
    """Why `meta` cannot be listed as a tool's `_meta`, or None."""
    if not all(type(key) is str and _META_KEY.fullmatch(key) for key in meta):
        return "key"
    try:
        written = json.dumps(dict(meta), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return "value"
    if len(written.encode("utf-8", "surrogatepass")) > MAX_META_BYTES:
        return "size"
    return None


def _unsafe(char: str) -> bool:
    return char not in _KEPT_FORMAT and unicodedata.category(char) in _UNSAFE


def _check_title(title: str | None, what: str) -> None:
    if title is None:
        return
    if type(title) is not str or len(title) > MAX_TITLE_CHARS or neutral_text(title) != title:
        raise ValueError(
            f"{what} is a str of at most {MAX_TITLE_CHARS} characters, without control, format"
            " or separator characters"
        )


def _src_ok(src: str) -> bool:
    if src.startswith("data:"):
        if len(src) > MAX_ICON_DATA_CHARS:
            return False
        found = _DATA.fullmatch(src)
        if found is None or not found.group(2):
            return False
        try:
            base64.b64decode(found.group(2), validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if len(src) > MAX_ICON_URL_CHARS or not src.isascii() or not src.isprintable():
        return False
    if any(char.isspace() for char in src):
        return False
    try:
        parts = urlsplit(src)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and "@" not in parts.netloc


def _annotations_of(raw: Mapping[str, object]) -> Annotations:
    title = raw.get("title")
    hints = [raw.get(key) for key in _HINTS]
    kept = [hint if type(hint) is bool else None for hint in hints]
    return Annotations(
        title=neutral_text(title) if isinstance(title, str) else None,
        read_only_hint=kept[0],
        destructive_hint=kept[1],
        idempotent_hint=kept[2],
        open_world_hint=kept[3],
    )


def _icons_of(raw: list[object]) -> tuple[Icon, ...]:
    icons: list[Icon] = []
    for item in raw:
        if len(icons) == MAX_ICONS:
            break
        if not isinstance(item, Mapping):
            continue
        src, mime, sizes, theme = (item.get(k) for k in ("src", "mimeType", "sizes", "theme"))
        if icon_problem(src, mime, sizes, theme) is None:
            assert isinstance(src, str)  # as icon_problem found
            icons.append(
                Icon(
                    src=src,
                    mime_type=mime if isinstance(mime, str) else None,
                    sizes=None if not isinstance(sizes, list | tuple) else tuple(sizes),
                    theme="light" if theme == "light" else "dark" if theme == "dark" else None,
                )
            )
    return tuple(icons)


NO_DISPLAY: Final = Display()
"""A tool that lists nothing beside its name, description and schemas."""
