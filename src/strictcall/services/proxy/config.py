"""A federation's config file (TOML): many upstreams behind one strictcall.

    [federation]                      # optional; every key has a default
    separator = "_"                   # between prefix and tool name: "_" (default) or "-"
    pinning = true                    # tool pinning (default on for a federation)
    timeout = 60                      # seconds a call may take, unless the upstream says
    budgets = { max_tools = 500 }     # every upstream's budgets, unless its own table says
    sandbox = "bwrap"                 # stdio upstreams' sandbox: "bwrap" or "none" (default:
                                      # the strongest the machine has)
    homes = "/var/lib/strictcall/homes"   # where their homes are kept (default: temporary)

    [upstreams.files]                 # the table's name is the upstream's name and prefix
    command = "node files.js --root /srv"       # a stdio server (split as a shell would)
    credentials.env = { FILES_TOKEN = "..." }    # its own credentials: added to its environment
    env_pass = ["HTTPS_PROXY"]        # the gateway's variables it is given (none by default)
    sandbox = "bwrap"                 # this one's sandbox, over the federation's
    network = false                   # in the sandbox, no network (default true)
    mounts = [{ path = "/srv", read_only = true }]   # paths it is shown (read-only by default)
    limits = { memory_mib = 2048, processes = 256, cpu_s = 3600, files = 1024 }
    instances = "per-identity"        # "shared" (default) or one process per caller identity
    max_instances = 50                # with per-identity: at most this many at once
    idle = 300                        # with per-identity: seconds unused before one is stopped

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
    budgets = { max_tools = 200 }     # what it may list and send (docs/BUDGETS.md)

Every key is checked: an unknown key, a wrong type, a name or prefix hosts would refuse, two
upstreams with one prefix, is a `ConfigError` naming the key (two without a prefix may serve
different names: a collision of served names is refused when the federation starts). The
caller's own token never goes upstream: an upstream's credentials are the ones written here.
"""

from __future__ import annotations

import math
import re
import shutil
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from strictcall.core.redact import Redaction
from strictcall.core.terminal import shown
from strictcall.errors import StrictcallError
from strictcall.services.proxy.budgets import DEFAULT_BUDGETS, Budgets
from strictcall.services.proxy.instances import DEFAULT_IDLE_S, DEFAULT_MAX_INSTANCES, PerIdentity
from strictcall.services.proxy.spawn import SANDBOXES, Mount, Spawn, SpawnLimits
from strictcall.services.proxy.tools import ToolOutput
from strictcall.services.proxy.upstream import RESTART_MAX_S, RESTART_MIN_S, UpstreamSpec

HOST_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name every host accepts: OpenAI's and Anthropic's function names (MCP allows more:
dots, 128 characters, which those hosts refuse)."""
SEPARATORS: Final = ("_", "-")
DEFAULT_SEPARATOR: Final = "_"
DEFAULT_TIMEOUT_S: Final = 60.0
INSTANCES: Final = ("shared", "per-identity")

_FEDERATION_KEYS: Final = frozenset(
    {"separator", "pinning", "timeout", "budgets", "sandbox", "homes"}
)
_SPAWN_KEYS: Final = frozenset(
    {"env_pass", "sandbox", "network", "mounts", "limits", "instances", "max_instances", "idle"}
)
_UPSTREAM_KEYS: Final = (
    frozenset(
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
            "budgets",
            "probe",
        }
    )
    | _SPAWN_KEYS
)
_LIMIT_KEYS: Final = frozenset({"memory_mib", "processes", "cpu_s", "files"})
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
    budgets: Budgets = DEFAULT_BUDGETS
    """What it may list and send (`strictcall.services.proxy.budgets`)."""
    per_identity: PerIdentity | None = None
    """One process per caller identity, with its bounds (`instances = "per-identity"`); None:
    one process for every caller ("shared")."""
    probe: bool = True
    """Whether sessions of its own learn which tools it lists only to a client offering
    sampling, elicitation or roots (false: each is listed to every caller)."""

    def output(self, tool: str, redaction: Redaction) -> ToolOutput:
        """How `tool`'s answers reach the caller: its own settings, else the upstream's
        (`pass_errors` passing its errors); `redaction`'s credentials and counts."""
        own = self.tools.get(tool, _NO_SETTINGS)
        withhold = self.withhold_errors and tool not in self.pass_errors
        if own.withhold_errors is not None:
            withhold = own.withhold_errors
        redact = self.redact if own.redact is None else own.redact
        passed = tool in self.pass_errors
        return ToolOutput(self.name, withhold, replace(redaction, results=redact), passed)

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
        ConfigError: the file cannot be read, is not TOML, is not shaped as documented, or
            names a program that is not there.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config {path}: {type(exc).__name__}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(toml_error(path, exc)) from None
    config = federation_config(data)
    for upstream in config.upstreams:
        missing = None if not upstream.spec.command else missing_program(upstream.spec.command[0])
        if missing is not None:
            raise ConfigError(f"upstreams.{upstream.name}.command: {missing}")
    return config


def toml_error(path: str, exc: tomllib.TOMLDecodeError) -> str:
    """A TOML syntax error as the operator fixes it: the file, the reason and its line and
    column (the parser's words, which never quote the file's text)."""
    return f"{path} is not valid TOML: {shown(str(exc))}; fix that line and start again"


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
    budgets = _budgets(top.get("budgets", {}), "federation.budgets", DEFAULT_BUDGETS)
    sandbox = _sandbox(top.get("sandbox"), "federation.sandbox")
    homes = top.get("homes")
    if homes is not None:
        homes = _text(homes, "federation.homes")
    defaults = Spawn(sandbox=sandbox, homes=homes)
    if "upstreams" not in data:
        raise ConfigError("the config names no upstream: add an [upstreams.NAME] table")
    tables = _table(data["upstreams"], "[upstreams]")
    if not tables:
        raise ConfigError("the config names no upstream: add an [upstreams.NAME] table")
    upstreams = tuple(
        _upstream(name, table, timeout, budgets, defaults) for name, table in tables.items()
    )
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


def _upstream(
    name: str, value: object, default_timeout: float, default_budgets: Budgets, defaults: Spawn
) -> UpstreamConfig:
    where = f"upstreams.{name}"
    if HOST_NAME.fullmatch(name) is None:
        raise ConfigError(f"upstream names are 1-64 of A-Z a-z 0-9 _ -: {name!r} is not")
    table = _table(value, f"[{where}]")
    _only(table, _UPSTREAM_KEYS, f"[{where}]")
    credentials = _credentials(table.get("credentials", {}), where)
    if ("command" in table) == ("url" in table):
        has = "both" if "command" in table else "neither"
        raise ConfigError(
            f"[{where}] has {has} of `command` and `url`: give it one, either"
            ' command = "PROGRAM ARGS..." (a stdio server) or url = "https://HOST/mcp"'
            " (a streamable HTTP server)"
        )
    try:
        if "command" in table:
            if credentials.headers:
                raise ConfigError(f"{where}.credentials.headers are for a `url` upstream")
            spec = UpstreamSpec.of_command(_text(table["command"], f"{where}.command"))
            spawn = _spawn(table, where, defaults)
            spec = UpstreamSpec(command=spec.command, env=dict(credentials.env), spawn=spawn)
        else:
            if credentials.env:
                raise ConfigError(f"{where}.credentials.env is for a `command` upstream")
            for key in sorted(_SPAWN_KEYS & table.keys()):
                raise ConfigError(f"{where}.{key} is for a `command` upstream")
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
    instances = table.get("instances", "shared")
    if instances not in INSTANCES:
        raise ConfigError(f'{where}.instances is "shared" or "per-identity"')
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
        budgets=_budgets(table.get("budgets", {}), f"{where}.budgets", default_budgets),
        withhold_errors=_flag(table.get("withhold_errors", False), f"{where}.withhold_errors"),
        redact=_redacts(table.get("redact", "secrets"), f"{where}.redact"),
        tools=settings,
        per_identity=_per_identity(str(instances), table, where),
        probe=_flag(table.get("probe", True), f"{where}.probe"),
    )


def _per_identity(instances: str, table: Mapping[str, object], where: str) -> PerIdentity | None:
    """An upstream's per-identity bounds (checked whichever `instances` is, so a typo in one is
    said at once); None: it is shared."""
    bounds = PerIdentity(
        max_instances=_count(
            table.get("max_instances", DEFAULT_MAX_INSTANCES), where, "max_instances"
        ),
        idle_s=_seconds(table.get("idle", DEFAULT_IDLE_S), f"{where}.idle"),
    )
    return bounds if instances == "per-identity" else None


def _budgets(value: object, where: str, base: Budgets) -> Budgets:
    table = _table(value, where)
    _only(table, frozenset(Budgets.names()), where)
    for key, count in table.items():
        if type(count) is not int or count < 1:
            raise ConfigError(f"{where}.{key} is a whole number, at least 1")
    return Budgets.of({key: count for key, count in table.items() if type(count) is int}, base)


def missing_program(program: str) -> str | None:
    """Why `program` cannot be started, when it is not there (None when it is): refused before
    serving, or a federation would serve without it, retrying it for ever."""
    if shutil.which(program) is not None:
        return None
    return (
        f"the program {shown(program)} was not found (not on PATH, or not an executable"
        " file): install it, or write its full path"
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


def _spawn(table: Mapping[str, object], where: str, defaults: Spawn) -> Spawn:
    """How a stdio upstream is started, as its table says (the federation's defaults else)."""
    passed = table.get("env_pass", [])
    if not isinstance(passed, list) or not all(
        type(name) is str and name and "=" not in name for name in passed
    ):
        raise ConfigError(f"{where}.env_pass is a list of environment variables' names")
    sandbox = _sandbox(table.get("sandbox", defaults.sandbox), f"{where}.sandbox")
    network = table.get("network", True)
    if type(network) is not bool:
        raise ConfigError(f"{where}.network is true or false")
    mounts_given = table.get("mounts", [])
    if not isinstance(mounts_given, list):
        raise ConfigError(f"{where}.mounts is a list of {{ path, read_only }} tables")
    mounts = []
    for index, given in enumerate(mounts_given):
        mount = _table(given, f"{where}.mounts[{index}]")
        _only(mount, frozenset({"path", "read_only"}), f"{where}.mounts[{index}]")
        path = _text(mount.get("path"), f"{where}.mounts[{index}].path")
        read_only = mount.get("read_only", True)
        if not path.startswith("/") or type(read_only) is not bool:
            raise ConfigError(
                f'{where}.mounts[{index}] is {{ path = "/absolute", read_only = true|false }}'
            )
        mounts.append(Mount(path, read_only))
    limits = _table(table.get("limits", {}), f"{where}.limits")
    _only(limits, _LIMIT_KEYS, f"{where}.limits")
    base = SpawnLimits()
    counts = {
        key: _count(limits.get(key, getattr(base, key)), f"{where}.limits", key)
        for key in sorted(_LIMIT_KEYS)
    }
    return Spawn(
        env_pass=tuple(passed),
        sandbox=sandbox,
        network=network,
        mounts=tuple(mounts),
        limits=SpawnLimits(**counts),
        homes=defaults.homes,
    )


def _sandbox(value: object, where: str) -> str | None:
    if value is None:
        return None
    if value not in SANDBOXES:
        raise ConfigError(f"{where} is one of {', '.join(map(repr, SANDBOXES))}")
    return str(value)


def _count(value: object, where: str, key: str) -> int:
    if type(value) is not int or value < 1:
        raise ConfigError(f"{where}.{key} is a positive whole number")
    return value


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


def hiding(config: FederationConfig, paths: Sequence[str]) -> FederationConfig:
    """`config` with the gateway's own files (`paths`: its store, config, policy) never shown
    to a sandboxed upstream."""
    upstreams = tuple(
        replace(u, spec=replace(u.spec, spawn=replace(u.spec.spawn, hidden=tuple(paths))))
        for u in config.upstreams
    )
    return replace(config, upstreams=upstreams)


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
    "hiding",
    "load_config",
    "missing_program",
    "toml_error",
]
