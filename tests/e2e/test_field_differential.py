"""The differential test of the NRI field table (issue 33): for every leaf, one reply setting it
on real containerd (1.7.24 and 2.1.9 here; 2.1.9 with runc 1.3 on cgroup v2 + systemd in
`make node-v2`), what the runtime produced compared with what the simulator's profile predicts
for the same reply on the same container. 0 differences, or the table
(bridge/contract/runtime_effects.py) is wrong.

Routes: `adjust` (a CreateContainer reply's adjustment), `update` (an UpdateContainer reply's
update for the container a CRI UpdateContainerResources resizes, as kubelet's resize) and
`cri_update` (the bridge's unsolicited POST /v1/updates, sent as CRI UpdateContainerResources).
A scripted webhook (tests/e2e/scripted_webhook.py) answers per container name; one container
per leaf and route, plus one control container per route that gets no reply.

Prediction: the simulator's application code (bridge.runtime_facts.apply) on the Container the
runtime sent in the request, with the profile's runtime. Where the prediction leaves a leaf's
value unchanged (the runtime ignores it), the runtime's value must equal the control
container's. Read back: the OCI spec containerd keeps (`ctr containers info`), the task's
`config.json` in the state directory (started containers), and the cgroup files (updates).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bridge.contract.adjustment import nri_adjustment_from_json
from bridge.contract.convert import from_json, to_json
from bridge.contract.field_table import LEAVES, UPDATE_LEAVES
from bridge.contract.runtime_effects import Route, Runtime
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_adjustment, apply_update
from bridge.runtime_facts.profiles import PROFILES
from bridge.webhooks.kinds import ALL_KINDS
from tests.waiting import wait_until

from .containerd import Containerd
from .cri import BASE_CPU_SHARES, CriClient, Pod
from .inspect_proc import CGROUP_V1_ROOT, cgroup_paths
from .leaf_cases import CASES, SKIPPED, Case, Json
from .policy_proc import WebhookBridge
from .private_containerd import keep_log
from .scripted_webhook import Reply, ScriptedWebhook

pytestmark = pytest.mark.e2e

CGROUP_V2 = (CGROUP_V1_ROOT / "cgroup.controllers").exists()
EVENTS = ["CreateContainer", "UpdateContainer"]
CONTROL = "control"
# What this node refuses although the runtime applies it (the refusal is the prediction): the
# error text runc gives.
NODE_REFUSES: dict[str, str] = {} if CGROUP_V2 else {
    "linux.resources.unified": "cannot use unified on cgroup v1"}
PREFIX = {Route.ADJUST: "a", Route.UPDATE: "u", Route.CRI_UPDATE: "c"}


@dataclass(frozen=True, slots=True)
class Difference:
    leaf: str
    route: str
    runtime: str
    predicted: Any
    got: Any


def slug(leaf: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", leaf.lower()).strip("-")


def name_of(route: Route, leaf: str) -> str:
    return f"{PREFIX[route]}-{slug(leaf)}"


def test_every_leaf_is_tested_or_skipped_with_a_reason() -> None:
    tested = {case.leaf for case in CASES}
    assert not tested & set(SKIPPED), "a leaf both tested and skipped"
    assert tested | set(SKIPPED) == set(LEAVES), (
        f"leaves neither tested nor skipped: {sorted(set(LEAVES) - tested - set(SKIPPED))}")
    updatable = {leaf.path for leaf in UPDATE_LEAVES} - set(SKIPPED)
    assert {c.leaf for c in CASES if c.update is not None} == updatable
    assert all(reason.strip() for reason in SKIPPED.values())


def test_the_prediction_lays_resources_with_the_bridges_one_overlay_rule() -> None:
    """The prediction (bridge.runtime_facts.apply) and the bridge's state cache lay resources
    over a container with the same function, so this differential checks the cache's rule too
    (issue 44.4: two `overlay_resources` with different device rules)."""
    from bridge.contract import resource_overlay
    from bridge.runtime_facts import apply
    assert vars(apply)["overlay_resources"] is resource_overlay.overlay_resources


def test_runtime_applies_what_the_field_table_says(
    containerd: Containerd, clean_pods: CriClient, request: pytest.FixtureRequest
) -> None:
    run_differential(containerd, clean_pods, request, lambda name: clean_pods.run_pod(name))


def _adjusting(adjust: Json) -> Reply:
    """The reply with `adjust` to a CreateContainer."""
    return lambda _body: {"adjust": adjust}


def _updating(resources: Json) -> Reply:
    """The reply to an UpdateContainer that updates its container's `resources`."""
    return lambda body: {"update": [
        {"container_id": body["container"]["id"], "linux": {"resources": resources}}]}


def run_differential(containerd: Containerd, cri: CriClient, request: pytest.FixtureRequest,
                     make_pod: Callable[[str], Pod]) -> None:
    """Play every case through `containerd` and fail with a table of the differences."""
    version = containerd.runtime.version
    runtime = PROFILES[f"containerd-{version}"].runtime
    base = Path(tempfile.mkdtemp(prefix="diff-", dir=containerd.dirs.base))
    hook = ScriptedWebhook(base / "hook.sock")
    for case in CASES:
        hook.replies[("CreateContainer", name_of(Route.ADJUST, case.leaf))] = _adjusting(
            case.adjust)
        if case.update is not None:
            hook.replies[("UpdateContainer", name_of(Route.UPDATE, case.leaf))] = _updating(
                case.update)
    bridge = WebhookBridge(containerd.dirs.nri_socket, base / "bridge", [
        {"name": "diff", "events": EVENTS, "url": hook.url(), "failure_policy": "Fail",
         "allow": sorted(ALL_KINDS)}])
    play = Play(containerd, cri, hook, runtime)
    try:
        hook.start()
        bridge.start()
        bridge.wait_ready()
        play.adjust(make_pod("diff-adjust"))
        play.update(make_pod("diff-update"))
        play.cri_update(make_pod("diff-cri"), bridge.control_socket)
    finally:
        bridge.stop()
        hook.stop()
        keep_log(bridge.log, f"{request.node.name.replace('/', '_')}-bridge.log")
    table = "\n".join(f"| {d.leaf} | {d.route} | {d.runtime} | {d.predicted!r} | {d.got!r} |"
                      for d in play.differences)
    print(f"containerd {version}: {play.compared} comparisons, "
          f"{len(play.differences)} differences\n{table}\nrefused:\n"
          + "\n".join(play.refusals))
    assert not play.differences, (
        f"the runtime differs from the field table ({len(play.differences)}):\n"
        "| leaf | route | runtime | predicted | got |\n|---|---|---|---|---|\n" + table)


class Play:
    """The containers of one runtime, what was predicted for them and what they got."""

    def __init__(self, containerd: Containerd, cri: CriClient, hook: ScriptedWebhook,
                 runtime: Runtime) -> None:
        self.containerd = containerd
        self.cri = cri
        self.hook = hook
        self.runtime = runtime
        self.differences: list[Difference] = []
        self.refusals: list[str] = []  # refused by the node (NODE_REFUSES) or the bridge
        self.compared = 0

    # -- reading the runtime ---------------------------------------------------------------

    def spec(self, cid: str) -> Json:
        """The OCI spec containerd keeps for the container (`ctr containers info`)."""
        spec: Json = json.loads(self.containerd.ctr("containers", "info", cid))["Spec"]
        return spec

    def config_json(self, cid: str) -> Json | None:
        path = (self.containerd.dirs.state / "io.containerd.runtime.v2.task" / "k8s.io" / cid
                / "config.json")
        return json.loads(path.read_text()) if path.exists() else None

    def request_container(self, event: str, name: str) -> api.Container:
        bodies = wait_until(lambda: self.hook.requests(event, name), what=f"{event} of {name}",
                            timeout_s=15.0)
        return from_json(bodies[-1]["container"], api.Container)

    def refused(self, leaf: str, route: Route, details: str) -> None:
        """The runtime refused the container or the update: predicted only for NODE_REFUSES."""
        self.refusals.append(f"{leaf} {route.value}: {details}")
        expected = NODE_REFUSES.get(leaf)
        self.check(leaf, route, expected or "accepted",
                   expected if expected and expected in details else details)

    def check(self, leaf: str, route: Route, predicted: Any, got: Any) -> None:
        self.compared += 1
        if predicted != got:
            self.differences.append(Difference(leaf, route.value, self.runtime.label,
                                               predicted, got))

    def expect(self, case: Case, before: api.Container, after: api.Container,
               control: Json) -> Any:
        """The predicted value as the OCI spec shows it: the simulator's where it changed the
        leaf, else the control container's (the runtime left the leaf as it would be)."""
        was, now = case.nri(to_json(before)), case.nri(to_json(after))
        return now if now != was else case.oci(control)

    # -- the routes ------------------------------------------------------------------------

    def adjust(self, pod: Pod) -> None:
        control = self.cri.create_container(pod, name=f"a-{CONTROL}")
        ids = {case.leaf: self.cri.create_container(pod, name=name_of(Route.ADJUST, case.leaf))
               for case in CASES}
        control_spec = self.spec(control)
        for case in CASES:
            name, cid = name_of(Route.ADJUST, case.leaf), ids[case.leaf]
            container = self.request_container("CreateContainer", name)
            predicted = apply_adjustment(container, nri_adjustment_from_json(case.adjust),
                                         self.runtime)
            expected = self.expect(case, container, predicted, control_spec)
            spec = self.spec(cid)
            self.check(case.leaf, Route.ADJUST, expected, case.oci(spec))
            # The task's bundle is the spec containerd keeps, as runc gets it.
            try:
                self.cri.start_container(cid)
            except grpc.RpcError as exc:  # a refusal is reported, not raised
                self.refused(case.leaf, Route.ADJUST, exc.details())
                continue
            self.check(case.leaf, Route.ADJUST, NODE_REFUSES.get(case.leaf, "started"),
                       "started")
            config = self.config_json(cid)
            self.check(case.leaf, Route.ADJUST, case.oci(spec),
                       case.oci(config) if config is not None else "no config.json")

    def update(self, pod: Pod) -> None:
        """kubelet's resize: UpdateContainerResources with the container's own resources; the
        webhook's UpdateContainer reply updates one leaf."""
        cases = [c for c in CASES if c.update is not None]
        control = self.cri.run_container(pod, name=f"u-{CONTROL}")
        ids = {c.leaf: self.cri.run_container(pod, name=name_of(Route.UPDATE, c.leaf))
               for c in cases}
        self.cri.update_cpu_shares(control, BASE_CPU_SHARES)
        for leaf, cid in list(ids.items()):
            try:
                self.cri.update_cpu_shares(cid, BASE_CPU_SHARES)
            except grpc.RpcError as exc:
                self.refused(leaf, Route.UPDATE, exc.details())
                del ids[leaf]
                continue
            self.check(leaf, Route.UPDATE, NODE_REFUSES.get(leaf, "updated"), "updated")
        control_spec, control_cg = self.spec(control), read_cgroups(self.cri, control)
        for case in (c for c in cases if c.leaf in ids):
            assert case.update is not None
            name, cid = name_of(Route.UPDATE, case.leaf), ids[case.leaf]
            body = self.hook.requests("UpdateContainer", name)[-1]
            before = from_json(body["container"], api.Container)
            requested = api.ContainerUpdate()
            requested.linux.resources.CopyFrom(
                from_json(body.get("linux_resources") or {}, api.LinuxResources))
            apply_update(before, requested)  # what the CRI request itself sets
            after = api.Container()
            after.CopyFrom(before)
            apply_update(after, update_of(cid, case.update), self.runtime, Route.UPDATE)
            self.compare_update(case, Route.UPDATE, cid, before, after, control_spec,
                                control_cg)

    def cri_update(self, pod: Pod, control_socket: Path) -> None:
        """The bridge's unsolicited update (POST /v1/updates), sent as CRI
        UpdateContainerResources on these runtimes."""
        cases = [c for c in CASES if c.update is not None]
        control = self.cri.run_container(pod, name=f"c-{CONTROL}")
        ids = {c.leaf: self.cri.run_container(pod, name=name_of(Route.CRI_UPDATE, c.leaf))
               for c in cases}
        transport = httpx.HTTPTransport(uds=str(control_socket))
        with httpx.Client(transport=transport, base_url="http://bridge", timeout=30.0) as client:
            def post(cid: str, resources: Json) -> str | None:
                reply = client.post("/v1/updates", json={"update": [
                    {"container_id": cid, "linux": {"resources": resources}}]})
                failed = reply.json().get("failed") if reply.status_code == 200 else reply.text
                return json.dumps(failed) if failed else None
            post(control, {"cpu": {"shares": BASE_CPU_SHARES}})
            for case in cases:
                assert case.update is not None
                failure = post(ids[case.leaf], case.update)
                if failure is not None:  # what the runtime kept is compared below
                    self.refusals.append(f"{case.leaf} cri_update: {failure}")
                    if case.leaf in NODE_REFUSES:  # the refusal was the prediction
                        del ids[case.leaf]
                self.check(case.leaf, Route.CRI_UPDATE,
                           "refused" if case.leaf in NODE_REFUSES else "sent",
                           "sent" if case.leaf in ids else "refused")
        control_spec, control_cg = self.spec(control), read_cgroups(self.cri, control)
        for case in (c for c in cases if c.leaf in ids):
            assert case.update is not None
            cid = ids[case.leaf]
            before = self.request_container("CreateContainer", name_of(Route.CRI_UPDATE,
                                                                       case.leaf))
            after = api.Container()
            after.CopyFrom(before)
            apply_update(after, update_of(cid, case.update), self.runtime, Route.CRI_UPDATE)
            self.compare_update(case, Route.CRI_UPDATE, cid, before, after, control_spec,
                                control_cg)

    def compare_update(self, case: Case, route: Route, cid: str, before: api.Container,
                       after: api.Container, control_spec: Json,
                       control_cg: dict[str, str]) -> None:
        self.check(case.leaf, route, self.expect(case, before, after, control_spec),
                   case.oci(self.spec(cid)))
        files = CGROUP_FILES.get(case.leaf)
        if files is None:
            return
        was, now = case.nri(to_json(before)), case.nri(to_json(after))
        cgroups = read_cgroups(self.cri, cid)
        got = tuple(cgroups.get(f) for f, _ in files)
        if now != was:
            expected: tuple[str | None, ...] = tuple(render(now) for _, render in files)
        else:
            expected = tuple(control_cg.get(f) for f, _ in files)
        self.check(f"{case.leaf} (cgroup {', '.join(f for f, _ in files)})", route,
                   expected, got)


def update_of(cid: str, resources: Json) -> api.ContainerUpdate:
    return from_json({"container_id": cid, "linux": {"resources": resources}},
                     api.ContainerUpdate)


# -- cgroup files an update writes (runc update), per cgroup version ------------------------

Render = Callable[[Any], str]
_V1: dict[str, list[tuple[str, Render]]] = {
    "linux.resources.memory.limit": [("memory/memory.limit_in_bytes", lambda v: str(v[0])),
                                     ("memory/memory.memsw.limit_in_bytes",
                                      lambda v: str(v[1]))],
    "linux.resources.memory.swap": [("memory/memory.memsw.limit_in_bytes", str)],
    "linux.resources.memory.reservation": [("memory/memory.soft_limit_in_bytes", str)],
    "linux.resources.memory.swappiness": [("memory/memory.swappiness", str)],
    "linux.resources.cpu.shares": [("cpu/cpu.shares", str)],
    "linux.resources.cpu.quota": [("cpu/cpu.cfs_quota_us", str)],
    "linux.resources.cpu.period": [("cpu/cpu.cfs_period_us", str)],
    "linux.resources.cpu.cpus": [("cpuset/cpuset.cpus", str)],
    "linux.resources.cpu.mems": [("cpuset/cpuset.mems", str)],
    "linux.resources.pids": [("pids/pids.max", str)],
}
_V2: dict[str, list[tuple[str, Render]]] = {
    # runc writes swap as memory.swap.max = swap - limit (cgroup v2 counts swap alone).
    "linux.resources.memory.limit": [("memory.max", lambda v: str(v[0])),
                                     ("memory.swap.max", lambda v: str(v[1] - v[0]))],
    "linux.resources.memory.reservation": [("memory.low", str)],
    "linux.resources.cpu.cpus": [("cpuset.cpus", str)],
    "linux.resources.cpu.mems": [("cpuset.mems", str)],
    "linux.resources.pids": [("pids.max", str)],
}
CGROUP_FILES = _V2 if CGROUP_V2 else _V1


def read_cgroups(cri: CriClient, cid: str) -> dict[str, str]:
    """The files of CGROUP_FILES for the container's process (missing files are left out)."""
    pid = cri.container_pid(cid)
    out: dict[str, str] = {}
    if CGROUP_V2:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        directory = CGROUP_V1_ROOT / next(x[3:] for x in lines if x.startswith("0::")).lstrip("/")
        names = {f for files in _V2.values() for f, _ in files}
        places = {name: directory / name for name in names}
    else:
        paths = cgroup_paths(pid)
        places = {}
        for files in _V1.values():
            for name, _ in files:
                controller, file = name.split("/")
                places[name] = CGROUP_V1_ROOT / controller / paths[controller].lstrip("/") / file
    for name, place in places.items():
        if place.exists():
            out[name] = place.read_text().strip()
    return out

