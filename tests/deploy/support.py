"""Readers for the deployment files, so the tests can compare them with the CLIs.

Owns: loading multi-document YAML, rendering the kustomize trees with the real
`kubectl kustomize` (the base, the overlays, and each with every set of
components) and checking objects against the Kubernetes OpenAPI schema of the
Kubernetes version the manifests target (the JSON schemas kubernetes-validate
ships, used offline), kubelet's environment and $(VAR) expansion of a
container's command line, views of the DaemonSet pod and the compose services, a systemd unit
reader, a Dockerfile reader, and parsing command lines with the real argparse
parsers and config files with the programs' own loaders.

Must not: start processes other than kubectl, touch the network, or know
expected values; the assertions live in the test modules.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import posixpath
import re
import shlex
import subprocess
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bridge import cli as bridge_cli
from policy_server import main as policy_cli

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZE = DEPLOY / "kubernetes"
BASE = KUSTOMIZE / "base"
OVERLAYS = sorted(p.parent for p in (KUSTOMIZE / "overlays").glob("*/kustomization.yaml"))
COMPONENTS = sorted(p.parent for p in (KUSTOMIZE / "components").glob("*/kustomization.yaml"))
# The Kubernetes release the manifests are written for and validated against.
TARGET_KUBERNETES = "1.35"
SYSTEMD = DEPLOY / "systemd"
RUNTIME = DEPLOY / "runtime"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = REPO / "docker-compose.yml"

BRIDGE = "nri-webhook-bridge"
POLICY_SERVER = "nri-policy-server"


def load_docs(path: Path) -> list[Any]:
    """Every document of a (multi-document) YAML file, empty ones dropped."""
    with path.open(encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def yaml_files() -> list[Path]:
    return sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml"), COMPOSE])


def project_scripts() -> dict[str, str]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


def pyproject() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


# --- argv -----------------------------------------------------------------------------


class RejectedArgs(AssertionError):
    pass


def _parse(parser: Any, argv: Sequence[str], what: str) -> Any:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(list(argv))
    except SystemExit:
        raise RejectedArgs(f"{what} rejects {list(argv)}: {err.getvalue().strip()}") from None


def parse_command(argv: Sequence[str]) -> tuple[str, Any]:
    """(program, parsed namespace) for a full command line of either program.

    The program may be given as an absolute path (systemd); the bridge's
    default subcommand is inserted as its ``main`` does.
    """
    program = Path(argv[0]).name
    rest = list(argv[1:])
    if program == BRIDGE:
        if not rest or rest[0] not in bridge_cli.SUBCOMMANDS:
            rest.insert(0, "run")
        return program, _parse(bridge_cli.build_bridge_parser(), rest, BRIDGE)
    if program == POLICY_SERVER:
        return program, _parse(policy_cli.build_parser(), rest, POLICY_SERVER)
    raise AssertionError(f"{argv[0]!r} is neither {BRIDGE} nor {POLICY_SERVER}")


def unix_url_path(url: str) -> str:
    """The socket path of a ``unix:///path.sock`` control URL (the whole path)."""
    assert url.startswith("unix:///"), f"{url!r} is not a unix:/// URL"
    return url.removeprefix("unix://")


def curl_option(command: Sequence[str], option: str) -> str:
    """The value of a curl option; curl takes it as the next argument, never ``--opt=value``."""
    assert not any(a.startswith(option + "=") for a in command), (
        f"curl does not accept {option}=VALUE: {command}")
    at = [i for i, a in enumerate(command) if a == option]
    assert len(at) == 1 and at[0] + 1 < len(command), f"need one {option} VALUE: {command}"
    return command[at[0] + 1]


def curl_unix_target(command: Sequence[str]) -> tuple[str, str]:
    """(socket path, HTTP path) of a ``curl --unix-socket PATH http://host/path`` probe."""
    assert command[0] == "curl", f"probe is not curl: {command}"
    assert "--fail" in command, f"probe without --fail treats HTTP errors as success: {command}"
    socket = curl_option(command, "--unix-socket")
    urls = [a for a in command[1:] if a.startswith("http://")]
    assert len(urls) == 1, f"probe needs one URL: {command}"
    return socket, "/" + urls[0].removeprefix("http://").partition("/")[2]


# --- kustomize, rendered by the real kubectl ---------------------------------------------

KUBECTL = "kubectl"
INSTALL_KUBECTL = "make tools (tests/deploy/setup/install-kubectl.sh)"


def _kubectl(*args: str) -> str:
    try:
        done = subprocess.run([KUBECTL, *args], capture_output=True, text=True, check=False,
                              timeout=60)
    except FileNotFoundError:
        raise AssertionError(f"kubectl is not installed; run {INSTALL_KUBECTL}") from None
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr.strip()}"
    return done.stdout


@functools.cache
def kubectl_version() -> str:
    """The client's MAJOR.MINOR, e.g. ``1.32`` (vendor suffixes like ``32+`` dropped)."""
    info = json.loads(_kubectl("version", "--client", "-o", "json"))["clientVersion"]
    minor = re.match(r"\d+", info["minor"])
    assert minor, f"unreadable kubectl version {info}"
    return f"{info['major']}.{minor.group(0)}"


@functools.cache
def _rendered(directory: Path) -> str:
    return _kubectl("kustomize", str(directory))


@functools.cache
def _parsed(directory: Path) -> str:
    docs = [d for d in yaml.load_all(_rendered(directory), Loader=_LOADER) if d is not None]
    assert all(isinstance(d, dict) for d in docs), f"{directory}: a rendered object is not a map"
    return json.dumps(docs)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` emits (a fresh copy per call)."""
    docs: list[dict[str, Any]] = json.loads(_parsed(directory))
    return docs


def combination(directory: Path, components: Sequence[Path]) -> Path:
    """A kustomization as an operator writes one: ``directory`` (the base or an overlay) with
    ``components``, in a temporary directory (kustomize wants relative paths)."""
    return _combination(directory, tuple(components))


@functools.cache
def _combination(directory: Path, components: tuple[Path, ...]) -> Path:
    where = Path(tempfile.mkdtemp(prefix="kustomize-"))
    lines = [f"resources: [{os.path.relpath(directory, where)}]"]
    if components:
        lines.append(f"components: [{', '.join(os.path.relpath(c, where) for c in components)}]")
    (where / "kustomization.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where


def run_variants() -> dict[str, Path]:
    """What tests/shipped runs for real, by name: the base, each overlay, and the production
    overlay with components/node-effects (hostPID, capabilities, resctrl)."""
    production = next(p for p in OVERLAYS if p.name == "production")
    node_effects = KUSTOMIZE / "components" / "node-effects"
    return {**{p.name: p for p in (BASE, *OVERLAYS)},
            "production+node-effects": combination(production, [node_effects])}


def combinations() -> list[tuple[Path, tuple[Path, ...]]]:
    """Every overlay (and the base) with every set of components."""
    sets = [tuple(c for i, c in enumerate(COMPONENTS) if mask >> i & 1)
            for mask in range(1 << len(COMPONENTS))]
    return [(d, cs) for d in (BASE, *OVERLAYS) for cs in sets]


def kustomization(directory: Path) -> dict[str, Any]:
    doc = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def major_minor(version: str) -> str:
    """``1.32.0`` -> ``1.32``."""
    return ".".join(version.split(".")[:2])


def schema_errors(doc: dict[str, Any], version: str | None = None) -> str | None:
    """Why ``doc`` does not match the OpenAPI schema of Kubernetes ``version`` (MAJOR.MINOR;
    default: TARGET_KUBERNETES) (strict: unknown fields are errors), or None when it does."""
    return _schema_errors(json.dumps(doc, sort_keys=True), version or TARGET_KUBERNETES)


@functools.lru_cache(maxsize=256)
def _schema_errors(text: str, version: str) -> str | None:
    """schema_errors, once per distinct object (the combinations share most of theirs)."""
    from kubernetes_validate.utils import ValidationError, validate

    doc = json.loads(text)
    try:
        used = validate(doc, version, strict=True)
    except ValidationError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top)"
        return f"{doc['kind']} {doc['metadata'].get('name')}: {where}: {exc.message}"
    # It falls back to an older schema when it has none for the version asked for.
    assert used == version, f"validated against {used}, not {version}"
    return None


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind
             and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in pod_spec["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container {name!r}"
    return found[0]


def volume_for(pod_spec: dict[str, Any], c: dict[str, Any], path: str) -> tuple[dict[str, Any],
                                                                               str, dict[str, Any]]:
    """(volume, path inside it, mount) that ``path`` of container ``c`` lives on."""
    mounts = sorted(c.get("volumeMounts", []), key=lambda m: len(m["mountPath"]), reverse=True)
    for m in mounts:
        root = m["mountPath"].rstrip("/")
        if path == root or path.startswith(root + "/"):
            volume = next(v for v in pod_spec["volumes"] if v["name"] == m["name"])
            return volume, path[len(root):].lstrip("/"), m
    raise AssertionError(f"{path} is on no volume of container {c['name']}")


_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGT]i?|m)?$")
_FACTORS = {None: 1, "m": 0.001, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: str | int) -> float:
    m = _QUANTITY.match(str(value))
    assert m, f"not a Kubernetes quantity: {value!r}"
    return float(m.group(1)) * _FACTORS[m.group(2)]


# --- kubelet's environment and $(VAR) expansion --------------------------------------


def container_env(docs: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, str]:
    """The environment kubelet gives container ``c``: ``value`` entries, and ``configMapKeyRef``
    entries looked up in the rendered ConfigMaps (a missing ConfigMap or key is an error, as
    kubelet's CreateContainerConfigError; ``optional: true`` leaves the variable out)."""
    env: dict[str, str] = {}
    for e in c.get("env", []):
        name = e["name"]
        if "value" in e:
            env[name] = expand(str(e["value"]), env)
            continue
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        assert ref is not None, f"{c['name']}: env {name}: only value and configMapKeyRef here"
        found = [d for d in docs if d["kind"] == "ConfigMap"
                 and d["metadata"]["name"] == ref["name"]]
        data = found[0].get("data", {}) if found else None
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                continue
            raise AssertionError(f"{c['name']}: env {name}: ConfigMap {ref['name']} "
                                 f"{'has no key ' + ref['key'] if found else 'not found'}")
        env[name] = str(data[ref["key"]])
    return env


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command, args and env values: ``$(NAME)`` becomes the
    variable's value when it is defined (else stays as written), ``$$`` is one ``$``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("$(", i):
            end = text.find(")", i + 2)
            if end != -1 and text[i + 2:end] in env:
                out.append(env[text[i + 2:end]])
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def container_argv(docs: list[dict[str, Any]], c: dict[str, Any]) -> list[str]:
    """The command line kubelet runs for ``c``: command + args with the environment
    expanded; a reference left unexpanded (a variable not defined) is an error."""
    env = container_env(docs, c)
    argv = [expand(a, env) for a in [*c.get("command", []), *c.get("args", [])]]
    left = [a for a in argv if re.search(r"\$\([A-Za-z_][A-Za-z0-9_]*\)", a)]
    assert not left, f"{c['name']}: undefined variables in {left}"
    return argv


# --- the DaemonSet's pod ---------------------------------------------------------------


class Pod:
    """The rendered DaemonSet's pod and both containers' parsed command lines."""

    def __init__(self, docs: list[dict[str, Any]], components: Sequence[Path] = ()) -> None:
        self.docs = docs
        self.components = tuple(components)  # those it was rendered with, if known
        self.daemonset = one(docs, "DaemonSet")
        self.spec: dict[str, Any] = self.daemonset["spec"]["template"]["spec"]
        self.bridge = container(self.spec, "bridge")
        self.policy = container(self.spec, "policy-server")
        # The command lines kubelet runs (the settings ConfigMap's values expanded).
        self.bridge_argv = container_argv(docs, self.bridge)
        self.policy_argv = container_argv(docs, self.policy)
        program, self.bridge_args = parse_command(self.bridge_argv)
        assert program == BRIDGE
        program, self.policy_args = parse_command(self.policy_argv)
        assert program == POLICY_SERVER

    def file(self, c: dict[str, Any], path: str) -> str:
        """The text a container sees at ``path``, when it comes from a ConfigMap."""
        volume, inside, _ = volume_for(self.spec, c, path)
        assert "configMap" in volume, f"{path} is not on a ConfigMap volume"
        cm = one(self.docs, "ConfigMap", volume["configMap"]["name"])
        assert inside in cm["data"], f"ConfigMap {cm['metadata']['name']} has no key {inside}"
        text = cm["data"][inside]
        assert isinstance(text, str)
        return text

    def webhooks(self) -> tuple[Any, ...]:
        return bridge_webhooks(self.file(self.bridge, self.bridge_args.config), "ConfigMap")


# --- docker-compose.yml --------------------------------------------------------------


class Compose:
    """docker-compose.yml's two services and their parsed command lines."""

    def __init__(self) -> None:
        (self.doc,) = load_docs(COMPOSE)
        self.services: dict[str, Any] = self.doc["services"]
        self.bridge = self.services["bridge"]
        self.policy = self.services["policy-server"]
        program, self.bridge_args = parse_command(self.bridge["command"])
        assert program == BRIDGE
        program, self.policy_args = parse_command(self.policy["command"])
        assert program == POLICY_SERVER

    @staticmethod
    def mounts(service: dict[str, Any]) -> list[dict[str, Any]]:
        """Volumes in long form: {type, source, target, read_only}."""
        out = []
        for v in service["volumes"]:
            if isinstance(v, str):
                parts = v.split(":")
                source, target = parts[0], parts[1]
                kind = "bind" if source.startswith((".", "/")) else "volume"
                v = {"type": kind, "source": source, "target": target,
                     "read_only": len(parts) > 2 and parts[2] == "ro"}
            out.append(v)
        return out

    def host_file(self, service: dict[str, Any], path: str) -> Path:
        """The repository file a service sees at ``path`` through a bind mount."""
        for m in sorted(self.mounts(service), key=lambda m: len(m["target"]), reverse=True):
            if m["type"] == "bind" and path.startswith(m["target"].rstrip("/") + "/"):
                assert m["source"].startswith("./"), "configs come from the repository"
                return REPO / str(m["source"]) / path[len(m["target"]):].lstrip("/")
        raise AssertionError(f"{path} is not bind-mounted")

    def volume_at(self, service: dict[str, Any], path: str) -> str:
        for m in self.mounts(service):
            if m["type"] == "volume" and posixpath.dirname(path) == m["target"]:
                return str(m["source"])
        raise AssertionError(f"{path} is on no named volume")


# --- systemd ---------------------------------------------------------------------------


@dataclass
class Unit:
    path: Path
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def value(self, section: str, key: str) -> str:
        found = self.values(section, key)
        assert len(found) == 1, f"{self.path.name}: [{section}] {key} set {len(found)} times"
        return found[0]

    def words(self, section: str, key: str) -> list[str]:
        return [w for v in self.values(section, key) for w in v.split()]


def read_unit(path: Path) -> Unit:
    """systemd.syntax(7): sections, repeatable keys, backslash line continuation."""
    unit = Unit(path)
    section: str | None = None
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.sections.setdefault(section, [])
            continue
        assert section is not None, f"{path.name}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not a key=value line: {line!r}"
        unit.sections[section].append((key.strip(), value.strip()))
    assert not pending, f"{path.name}: ends in a line continuation"
    return unit


def exec_argv(unit: Unit) -> list[str]:
    return shlex.split(unit.value("Service", "ExecStart"))


# --- Dockerfile ------------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), (
            f"{self.keyword} is not in exec (JSON array) form: {self.args}")
        return value


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def read_dockerfile(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) with continuation lines joined and ARGs substituted."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    logical: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "Dockerfile ends in a line continuation"
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
            continue
        if keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)],
                           words[0])
            stage = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(image, stage))
            continue
        assert stages, f"{keyword} before FROM"
        stages[-1].instructions.append(Instruction(keyword, rest))
    return args, stages


def copy_sources(instruction: Instruction) -> tuple[dict[str, str], list[str], str]:
    """(--flags, sources, destination) of a shell-form COPY."""
    words = shlex.split(instruction.args)
    flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    return flags, paths[:-1], paths[-1]


# --- configuration files, through the programs' own loaders ----------------------------


def bridge_webhooks(text: str, source: str) -> tuple[Any, ...]:
    """Load a bridge config as ``--config`` does and return its webhook specs."""
    from bridge.config_file import load_text

    return load_text(text, source).webhooks


def koordinator_rules(text: str) -> Any:
    """Parse a rules file as ``nri-policy-server --rules`` does."""
    from policy_server.policies.koordinator_qos.rules import rules_from_yaml

    return rules_from_yaml(text)
