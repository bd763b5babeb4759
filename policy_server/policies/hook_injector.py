"""``hook-injector``: OCI hooks from hooks directories, added to containers at CreateContainer.

Owns the hooks directories: every ``*.json`` file in them is an OCI hook file (see
``oci_hooks``); a file in a later directory replaces one with the same name in an earlier one,
and hooks are added in file-name order. The directories are re-read when their listing or a
file's mtime/size changes (checked once per event by the context provider, so handlers stay
pure); a file that cannot be read or parsed is logged once and skipped, as CRI-O does.

``when.annotations`` is matched against the container's annotations over its pod's
annotations: in Kubernetes users write pod annotations, which CRI-O copies into the container's
OCI annotations but containerd does not. ``hasBindMounts`` counts the container's bind mounts
other than the four every CRI container gets from the runtime (``/etc/hostname``,
``/etc/hosts``, ``/etc/resolv.conf``, ``/dev/shm``), i.e. the volumes the pod asked for.
A hook file whose ``when`` names annotations is chosen by the pod's author (an OCI hook runs
as root on the node), so it is injected only into pods of the namespaces the configuration
lists (``namespaces``; none by default, ``*`` for all); elsewhere it is left out with a warning
(docs/security.md#pod-metadata-is-input-not-authority). Hooks chosen without annotations
(``always``, ``commands``, ``hasBindMounts``) apply as the files say. Must not run the hooks
(the runtime does). The webhook needs ``allow: [hooks]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from policy_server.policies.oci_hooks import HookFile, HookFileError, parse_hook_file
from policy_server.policies.pod_annotations import NamespaceScope
from policy_server.policies.policy_config import Paths, PolicyConfig, PolicySettings, Strings
from policy_server.sdk import (
    Adjustment,
    Container,
    Decision,
    Event,
    EventName,
    FailurePolicy,
    Policy,
    StagedHook,
)

log = logging.getLogger(__name__)

NAME = "hook-injector"
DESCRIPTION = "OCI hooks from hooks directories (hooks.d JSON files, 'when' conditions)"
# Where CRI-O and Podman look, in this order (the second overrides the first).
DEFAULT_DIRS = ("/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d")
RUNTIME_BIND_MOUNTS = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/dev/shm"})
MAX_HOOK_FILE_BYTES = 64 * 1024

# (directory, file name, inode, mtime_ns, size) of every hook file: a change means re-read.
Signature = tuple[tuple[str, str, int, int, int], ...]


@dataclass(frozen=True, slots=True)
class HookSet:
    """The hook files in force, in injection order, and the files that were skipped."""

    files: tuple[HookFile, ...] = ()
    skipped: tuple[str, ...] = ()


class HookLibrary:
    """The hooks directories, re-read when they change (see the module docstring)."""

    def __init__(self, dirs: tuple[Path, ...]) -> None:
        self.dirs = dirs
        self._signature: Signature | None = None
        self._current = HookSet()

    def _scan(self) -> tuple[Signature, dict[str, Path]]:
        entries: list[tuple[str, str, int, int, int]] = []
        chosen: dict[str, Path] = {}  # file name -> path; later directories win
        for directory in self.dirs:
            try:
                with os.scandir(directory) as it:
                    for entry in it:
                        try:
                            if not entry.name.endswith(".json") or not entry.is_file():
                                continue
                            st = entry.stat()
                        except OSError:
                            continue  # removed while we looked: the next scan sees the change
                        entries.append(
                            (str(directory), entry.name, st.st_ino, st.st_mtime_ns, st.st_size)
                        )
                        chosen[entry.name] = Path(entry.path)
            except FileNotFoundError:
                continue  # a missing directory holds no hooks (the defaults often do not exist)
            except OSError as exc:
                log.error("hook-injector: cannot read hooks directory %s: %s", directory, exc)
        return tuple(sorted(entries)), chosen

    def current(self) -> HookSet:
        signature, chosen = self._scan()
        if signature != self._signature:
            self._current = self._load(chosen)
            self._signature = signature
        return self._current

    def _load(self, chosen: Mapping[str, Path]) -> HookSet:
        files: list[HookFile] = []
        skipped: list[str] = []
        for name in sorted(chosen):
            path = chosen[name]
            try:
                if path.stat().st_size > MAX_HOOK_FILE_BYTES:
                    raise HookFileError(f"larger than {MAX_HOOK_FILE_BYTES} bytes")
                files.append(parse_hook_file(name, path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError, HookFileError) as exc:
                log.error("hook-injector: skipping hook file %s: %s", path, exc)
                skipped.append(f"{path}: {exc}")
        log.info(
            "hook-injector: %d hook files in force (%s), %d skipped",
            len(files), ", ".join(f.name for f in files) or "none", len(skipped),
        )  # fmt: skip
        return HookSet(tuple(files), tuple(skipped))


def has_bind_mounts(container: Container) -> bool:
    return any(
        (m.type == "bind" or "bind" in m.options or "rbind" in m.options)
        and m.destination not in RUNTIME_BIND_MOUNTS
        for m in container.mounts
    )


def hooks_for(
    hooks: HookSet, event: Event, scope: NamespaceScope
) -> tuple[tuple[StagedHook, ...], tuple[str, ...]]:
    """The hooks whose ``when`` matches the event's container, in file order, and the names of
    the files left out because annotations chose them outside ``scope``."""
    if event.container is None:
        return (), ()
    container = event.container
    pod_annotations = event.pod.annotations if event.pod is not None else {}
    annotations = {**pod_annotations, **container.annotations}
    command = container.args[0] if container.args else None
    bind_mounts = has_bind_mounts(container)
    in_scope = scope.allows(event.pod.namespace if event.pod is not None else "")
    found: list[StagedHook] = []
    left_out: list[str] = []
    for f in hooks.files:
        if not f.when.matches(annotations, command, bind_mounts):
            continue
        if f.when.annotations and not in_scope:
            left_out.append(f.name)
            continue
        found.extend(StagedHook(stage, f.hook) for stage in f.stages)
    return tuple(found), tuple(left_out)


class _Config(PolicyConfig):
    hooks_dirs: Paths = None
    namespaces: Strings = None


def build(settings: PolicySettings) -> Policy[HookSet]:
    config = settings.parse(_Config)
    dirs = config.hooks_dirs  # [] is no directory; absent or null, the defaults
    library = HookLibrary(dirs if dirs is not None else tuple(Path(d) for d in DEFAULT_DIRS))
    scope = NamespaceScope.of(config.namespaces)
    library.current()  # load now: problems show in the log at startup
    # A bug in here must not start the container without what it asked for.
    policy = Policy(
        NAME, context=library.current, description=DESCRIPTION, failure_policy=FailurePolicy.FAIL
    )

    @policy.on(EventName.CREATE_CONTAINER)
    def inject_hooks(event: Event, hooks: HookSet) -> Decision | None:
        found, left_out = hooks_for(hooks, event, scope)
        warnings: tuple[str, ...] = ()
        if left_out and event.pod is not None:
            pod = f"{event.pod.namespace}/{event.pod.name}"
            warnings = (
                f"hook-injector: pod {pod}: hook files {', '.join(left_out)} are chosen by "
                f"annotations and namespace {event.pod.namespace!r} is not in this node's "
                "hook-injector namespaces; not injected",
            )
        if not (found or warnings):
            return None
        return Decision(adjust=Adjustment(hooks=found) if found else None, warnings=warnings)

    return policy
