"""A federation's config file (TOML): many upstreams behind one strictcall.

    [federation]                      # optional; every key has a default
    separator = "_"                   # between prefix and tool name: "_" (default) or "-"
    pinning = true                    # tool pinning (default on for a federation)
    timeout = 60                      # seconds a call may take, unless the upstream says

    [upstreams.files]                 # the table's name is the upstream's name and prefix
    command = "node files.js --root /srv"       # a stdio server (split as a shell would)
    credentials.env = { FILES_TOKEN = "..." }    # its own credentials: added to its environment

    [upstreams.tickets]
    url = "https://tickets.internal/mcp"         # a streamable HTTP server
    credentials.headers = { Authorization = "Bearer ..." }   # sent with every request
    prefix = "jira"                   # another prefix ("" for none)
    timeout = 10
    restart = { min = 0.5, max = 30 } # seconds before a restart: doubling from min up to max
    withhold_errors = true            # its error results answered as a bare tool_error
    pass_errors = ["search"]          # its tools whose error results pass all the same
    redact = "off"                    # its results not redacted ("secrets", the default)
    tools.search = { redact = "secrets" }       # one tool's own: redact, withhold_errors

Every key is checked: an unknown key, a wrong type, a name or prefix hosts would refuse, two
upstreams with one prefix, is a `ConfigError` naming the key (two without a prefix may serve
different names: a collision of served names is refused when the federation starts). The
caller's own token never goes upstream: an upstream's credentials are the ones written here.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from strictcall.core.redact import Redaction
from strictcall.errors import StrictcallError
from strictcall.services.proxy.tools import ToolOutput
from strictcall.services.proxy.upstream import RESTART_MAX_S, RESTART_MIN_S, UpstreamSpec

HOST_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name every host accepts: OpenAI's and Anthropic's function names (MCP allows more:
dots, 128 characters, which those hosts refuse)."""
SEPARATORS: Final = ("_", "-")
DEFAULT_SEPARATOR: Final = "_"
DEFAULT_TIMEOUT_S: Final = 60.0

_FEDERATION_KEYS: Final = frozenset({"separator", "pinning", "timeout"})
_UPSTREAM_KEYS: Final = frozenset(
    {
        "command",
        "url",
        "credentials",
        "prefix",
        "timeout",
        "restart",
        "pass_errors",
        "withhold_errors",
        "redact",
        "tools",
    }
)
_TOOL_KEYS: Final = frozenset({"withhold_errors", "redact"})
REDACT_VALUES: Final = ("secrets", "off")
"""What `redact` may say: redact secrets in results' text (the default), or not."""
_CREDENTIAL_KEYS: Final = frozenset({"headers", "env"})


class ConfigError(StrictcallError, ValueError):
    """The federation's config file cannot be read, or is not shaped as documented."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """An upstream's own credentials (never a caller's): headers sent to an HTTP upstream,
    variables added to a stdio upstream's environment."""

    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """One tool's own settings (None: the upstream's)."""

    withhold_errors: bool | None = None
    redact: bool | None = None


_NO_SETTINGS: Final = ToolSettings()


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """One upstream of a federation, as its config file names it."""

    name: str
    spec: UpstreamSpec
    prefix: str
    timeout: float
    restart_min_s: float = RESTART_MIN_S
    restart_max_s: float = RESTART_MAX_S
    pass_errors: frozenset[str] = frozenset()
    withhold_errors: bool = False
    redact: bool = True
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    """Each tool's own settings, where the file gives some."""

    def output(self, tool: str, redaction: Redaction) -> ToolOutput:
        """How `tool`'s answers reach the caller: its own settings, else the upstream's
        (`pass_errors` passing its errors); `redaction`'s credentials and counts."""
        own = self.tools.get(tool, _NO_SETTINGS)
        withhold = self.withhold_errors and tool not in self.pass_errors
        if own.withhold_errors is not None:
            withhold = own.withhold_errors
        redact = self.redact if own.redact is None else own.redact
        return ToolOutput(self.name, withhold, replace(redaction, results=redact))

    def served_name(self, tool: str, separator: str) -> str:
        """The name a tool of this upstream is served as: `prefix` `separator` `tool`, or the
        tool's own with an empty prefix."""
        return f"{self.prefix}{separator}{tool}" if self.prefix else tool


@dataclass(frozen=True, slots=True)
class FederationConfig:
    """Many upstreams behind one strictcall, in the order the file names them."""

    upstreams: tuple[UpstreamConfig, ...]
    separator: str = DEFAULT_SEPARATOR
    pinning: bool = True


def load_config(path: str) -> FederationConfig:
    """The federation in the TOML file at `path`.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or is not shaped as documented.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config {path}: {type(exc).__name__}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config {path} is not TOML: {exc}") from None
    return federation_config(data)


def federation_config(data: Mapping[str, object]) -> FederationConfig:
    """The federation of an already parsed config document.

    Raises:
        ConfigError: the document is not shaped as documented.
    """
    # [oauth], the identity provider of the federation's HTTP endpoint, is read by its own
    # reader (`strictcall.identity.settings.load_settings`)
    _only(data, frozenset({"federation", "upstreams", "oauth"}), "the config")
    top = _table(data.get("federation", {}), "[federation]")
    _only(top, _FEDERATION_KEYS, "[federation]")
    separator = _text(top.get("separator", DEFAULT_SEPARATOR), "federation.separator")
    if separator not in SEPARATORS:
        raise ConfigError('federation.separator is "_" or "-" (the characters hosts accept)')
    pinning = top.get("pinning", True)
    if type(pinning) is not bool:
        raise ConfigError("federation.pinning is true or false")
    timeout = _seconds(top.get("timeout", DEFAULT_TIMEOUT_S), "federation.timeout")
    if "upstreams" not in data:
        raise ConfigError("the config names no upstream: add an [upstreams.NAME] table")
    tables = _table(data["upstreams"], "[upstreams]")
    if not tables:
        raise ConfigError("the config names no upstream: add an [upstreams.NAME] table")
    upstreams = tuple(_upstream(name, table, timeout) for name, table in tables.items())
    by_prefix: dict[str, str] = {}
    for upstream in upstreams:
        if not upstream.prefix:  # unprefixed upstreams may differ in names: checked at start
            continue
        other = by_prefix.setdefault(upstream.prefix, upstream.name)
        if other != upstream.name:
            raise ConfigError(
                f"upstreams {other} and {upstream.name} have the same prefix"
                f" ({upstream.prefix!r}): give one of them its own `prefix`"
            )
    return FederationConfig(upstreams, separator=separator, pinning=pinning)


def _upstream(name: str, value: object, default_timeout: float) -> UpstreamConfig:
    where = f"upstreams.{name}"
    if HOST_NAME.fullmatch(name) is None:
        raise ConfigError(f"upstream names are 1-64 of A-Z a-z 0-9 _ -: {name!r} is not")
    table = _table(value, f"[{where}]")
    _only(table, _UPSTREAM_KEYS, f"[{where}]")
    credentials = _credentials(table.get("credentials", {}), where)
    if ("command" in table) == ("url" in table):
        raise ConfigError(f"{where} has either `command` (stdio) or `url` (streamable HTTP)")
    try:
        if "command" in table:
            if credentials.headers:
                raise ConfigError(f"{where}.credentials.headers are for a `url` upstream")
            spec = UpstreamSpec.of_command(_text(table["command"], f"{where}.command"))
            spec = UpstreamSpec(command=spec.command, env=dict(credentials.env))
        else:
            if credentials.env:
                raise ConfigError(f"{where}.credentials.env is for a `command` upstream")
            url = _text(table["url"], f"{where}.url")
            spec = UpstreamSpec.of_url(url, [])
            spec = UpstreamSpec(url=spec.url, headers=dict(credentials.headers))
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where}: {exc}") from None
    prefix = _text(table.get("prefix", name), f"{where}.prefix")
    if prefix and HOST_NAME.fullmatch(prefix) is None:
        raise ConfigError(f"{where}.prefix is empty or 1-64 of A-Z a-z 0-9 _ -")
    restart = _table(table.get("restart", {}), f"{where}.restart")
    _only(restart, frozenset({"min", "max"}), f"{where}.restart")
    restart_min = _seconds(restart.get("min", RESTART_MIN_S), f"{where}.restart.min")
    restart_max = _seconds(
        restart.get("max", max(RESTART_MAX_S, restart_min)), f"{where}.restart.max"
    )
    if restart_max < restart_min:
        raise ConfigError(f"{where}.restart.max is at least restart.min")
    passed = table.get("pass_errors", [])
    if not isinstance(passed, list) or not all(type(tool) is str for tool in passed):
        raise ConfigError(f"{where}.pass_errors is a list of the upstream's tool names")
    tools = _table(table.get("tools", {}), f"{where}.tools")
    settings = {tool: _tool_settings(own, f"{where}.tools.{tool}") for tool, own in tools.items()}
    return UpstreamConfig(
        name=name,
        spec=spec,
        prefix=prefix,
        timeout=_seconds(table.get("timeout", default_timeout), f"{where}.timeout"),
        restart_min_s=restart_min,
        restart_max_s=restart_max,
        pass_errors=frozenset(passed),
        withhold_errors=_flag(table.get("withhold_errors", False), f"{where}.withhold_errors"),
        redact=_redacts(table.get("redact", "secrets"), f"{where}.redact"),
        tools=settings,
    )


def _tool_settings(value: object, where: str) -> ToolSettings:
    table = _table(value, f"[{where}]")
    _only(table, _TOOL_KEYS, f"[{where}]")
    withhold = table.get("withhold_errors")
    redact = table.get("redact")
    return ToolSettings(
        None if withhold is None else _flag(withhold, f"{where}.withhold_errors"),
        None if redact is None else _redacts(redact, f"{where}.redact"),
    )


def _flag(value: object, where: str) -> bool:
    if type(value) is not bool:
        raise ConfigError(f"{where} is true or false")
    return value


def _redacts(value: object, where: str) -> bool:
    if value not in REDACT_VALUES:
        raise ConfigError(f'{where} is "secrets" (the default) or "off"')
    return value == "secrets"


def _credentials(value: object, where: str) -> Credentials:
    table = _table(value, f"{where}.credentials")
    _only(table, _CREDENTIAL_KEYS, f"{where}.credentials")
    found: dict[str, dict[str, str]] = {}
    for key in sorted(_CREDENTIAL_KEYS):
        pairs = _table(table.get(key, {}), f"{where}.credentials.{key}")
        for pair_name, pair_value in pairs.items():
            if type(pair_value) is not str or not pair_name or "\n" in pair_value:
                raise ConfigError(f"{where}.credentials.{key} maps names to one-line strings")
        found[key] = {pair_name: str(pair_value) for pair_name, pair_value in pairs.items()}
    return Credentials(headers=found["headers"], env=found["env"])


def _only(table: Mapping[str, object], keys: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise ConfigError(
            f"{where} has an unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})"
        )


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} is a table")
    return value


def _text(value: object, where: str) -> str:
    if type(value) is not str:
        raise ConfigError(f"{where} is a string")
    return value


def _seconds(value: object, where: str) -> float:
    # a bool is an int to Python: `timeout = true` is refused, as is 0 (no time at all)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise ConfigError(f"{where} is a positive number of seconds")


MIN_KNOWN: Final = 8
"""The shortest credential redacted wherever it appears (a shorter one would replace words)."""


def known_credentials(upstreams: Iterable[UpstreamConfig]) -> tuple[str, ...]:
    """The upstreams' own credentials (header and environment values, and a header's token
    after its scheme: "Bearer abc" gives "abc" too), longest first, to redact as they are."""
    found: set[str] = set()
    for upstream in upstreams:
        spec = upstream.spec
        for value in (*spec.headers.values(), *spec.env.values()):
            found.add(value)
            found.add(value.partition(" ")[2])
    return tuple(sorted((v for v in found if len(v) >= MIN_KNOWN), key=lambda v: (-len(v), v)))


def describe(upstream: UpstreamConfig) -> str:
    """How the log names an upstream: its name and where it is (never a credential)."""
    return f"{upstream.name} ({upstream.spec.describe()})"


__all__ = [
    "ConfigError",
    "Credentials",
    "FederationConfig",
    "UpstreamConfig",
    "federation_config",
    "load_config",
]
