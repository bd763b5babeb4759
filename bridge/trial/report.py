"""`try` results per container: the JSON objects (schemas/try/output.schema.json) and the
table.

Owns: matching each recorded webhook exchange to the container it was about (pod events go
to every container of the pod), deciding what counts as a reject (an enforced reply's
`reject`, or a failed call under failure_policy Fail) and what counts as a failed call (any
exchange with an error, whatever the failure policy or mode), and both renderings.
Also what the profile's runtime leaves out of each reply (`runtime`: the field table's notices,
bridge.contract.applied_view: "containerd 2.1.9 ignores memory.swappiness in an adjustment").
Must not: run anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bridge.contract.applied_view import reply_notices
from bridge.contract.runtime_effects import Runtime
from bridge.trial.play import ContainerRun, PodRun, TrialResult
from bridge.trial.relay import Exchange

POD_EVENTS = frozenset({"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox",
                        "UpdatePodSandbox", "PostUpdatePodSandbox"})


def results(trial: TrialResult) -> list[dict[str, Any]]:
    """One object per container, pods in input order, containers in kubelet's order."""
    out = []
    for run in trial.pods:
        for crun in run.containers:
            out.append(_container(run, crun, _about(trial.exchanges, run, crun), trial.runtime))
    return out


def _about(exchanges: Sequence[Exchange], run: PodRun, crun: ContainerRun) -> list[Exchange]:
    mine = []
    for ex in exchanges:
        pod = ex.request.get("pod") or {}
        ctr = ex.request.get("container") or {}
        same_pod = (pod.get("id") == run.sandbox_id if pod.get("id") else
                    (pod.get("namespace"), pod.get("name")) == (run.pod.namespace, run.pod.name))
        pod_event = ex.event in POD_EVENTS and same_pod
        if pod_event or ctr.get("id") == crun.container_id:
            mine.append(ex)
    return mine


def _container(run: PodRun, crun: ContainerRun, exchanges: list[Exchange],
               runtime: Runtime | None) -> dict[str, Any]:
    pod = run.pod
    spec = next(c for c in pod.containers if c.name == crun.name)
    requests: dict[str, Any] = {}
    adjust: dict[str, Any] = {}
    update: dict[str, list[Any]] = {}
    warnings: list[dict[str, str]] = []
    reject: dict[str, str] | None = None
    notices: list[dict[str, str]] = []
    for ex in exchanges:
        requests.setdefault(ex.event, ex.request)
        shadow = ex.shadow
        if ex.error is not None:
            warnings.append({"webhook": ex.webhook, "event": ex.event,
                             "message": f"call failed: {ex.error}"})
            continue
        reply = ex.reply or {}
        for text in reply.get("warnings", []):
            warnings.append({"webhook": ex.webhook, "event": ex.event, "message": str(text)})
        if "reject" in reply:
            reason = str((reply["reject"] or {}).get("reason", ""))
            if shadow:
                warnings.append({"webhook": ex.webhook, "event": ex.event,
                                 "message": f"shadow mode: would reject: {reason}"})
            elif reject is None:
                reject = {"webhook": ex.webhook, "event": ex.event, "reason": reason}
            continue
        if shadow:
            continue
        if runtime is not None:
            notices += reply_notices(ex.webhook, ex.event, reply, runtime)
        if reply.get("adjust"):
            adjust[ex.webhook] = reply["adjust"]
        if reply.get("update"):
            update.setdefault(ex.webhook, []).extend(reply["update"])
    failed = [r for r in ([run.sandbox] if run.sandbox else []) + crun.calls if not r.ok]
    if reject is None and failed:
        error = failed[0].error or "failed"
        event = next((e.event for e in failed[0].events if not e.ok), failed[0].call)
        webhook, why = _failed_call(exchanges, event)
        # The relay's own error, not how the bridge saw the relay's answer ("HTTP 502").
        reason = f'webhook "{webhook}" failed: {why}' if why else error
        reject = {"webhook": webhook, "event": event, "reason": reason}
    if crun.not_started is not None:
        warnings.append({"webhook": "", "event": "", "message":
                         f"not started: {crun.not_started}"})
    resize = {"resize": crun.resize} if crun.resize else {}
    return {
        **resize,
        "pod": f"{pod.namespace}/{pod.name}", "container": crun.name, "kind": spec.kind.value,
        "qos_class": pod.qos_class, "cgroup_parent": pod.cgroup_parent,
        "requests": requests, "adjust": adjust, "update": update, "reject": reject,
        "warnings": warnings, "runtime": notices, "effective": crun.effective,
    }


def _failed_call(exchanges: Sequence[Exchange], event: str) -> tuple[str, str]:
    """(webhook, error) of the enforced call of `event` that failed, or ("", "")."""
    return next(((ex.webhook, ex.error) for ex in exchanges
                 if ex.event == event and ex.error and not ex.shadow), ("", ""))


def failures(trial: TrialResult) -> list[str]:
    """Every failed webhook call, one line each: webhook, event, what it was about, why."""
    out = []
    for ex in trial.exchanges:
        if ex.error is None:
            continue
        pod = ex.request.get("pod") or {}
        about = [ex.event]
        if pod.get("name"):
            about.append(f"pod {pod.get('namespace', '')}/{pod['name']}")
        name = (ex.request.get("container") or {}).get("name")
        if name:
            about.append(f"container {name}")
        out.append(f"{ex.webhook} ({', '.join(about)}): {ex.error}")
    return out


def rejected(objects: Sequence[dict[str, Any]]) -> bool:
    return any(o["reject"] is not None for o in objects)


# -- the table ------------------------------------------------------------------------------


def table(objects: Sequence[dict[str, Any]]) -> str:
    lines: list[str] = []
    pod = None
    for o in objects:
        if o["pod"] != pod:
            pod = o["pod"]
            lines.append(f"{'' if not lines else chr(10)}pod {pod}  ({o['qos_class']}, "
                         f"cgroup parent {o['cgroup_parent']})")
        lines.append(f"  {o['kind']} {o['container']}")
        for webhook, adj in o["adjust"].items():
            lines.append(f"    {webhook}: adjust {_summary(adj)}")
        for webhook, updates in o["update"].items():
            for u in updates:
                lines.append(f"    {webhook}: update {u.get('container_id', '')[:12]} "
                             f"{_summary(u)}")
        for n in o["runtime"]:
            lines.append(f"    runtime: {n['message']} ({n['webhook']}, {n['event']})")
        for w in o["warnings"]:
            who = f"{w['webhook']} ({w['event']})" if w["webhook"] else "try"
            lines.append(f"    {who}: warning: {w['message']}")
        if o["reject"] is not None:
            r = o["reject"]
            lines.append(f"    {r['webhook'] or 'runtime'}: REJECTED {r['event']}: {r['reason']}")
        if not (o["adjust"] or o["update"] or o["warnings"] or o["reject"] or o["runtime"]):
            events = ", ".join(o["requests"]) or "no events"
            lines.append(f"    no change ({events})")
        if o["effective"] is not None:
            lines.append(f"    effective: {_effective(o['effective'])}")
    return "\n".join(lines)


def _summary(adjust: dict[str, Any]) -> str:
    parts: list[str] = []
    linux = adjust.get("linux", {})
    parts += _resources(linux.get("resources", {}))
    if "oom_score_adj" in linux:
        parts.append(f"oom_score_adj={linux['oom_score_adj']}")
    parts += [f"env {e.get('key')}={e.get('value', '')}" for e in adjust.get("env", [])]
    parts += [f"mount {m.get('destination')}" for m in adjust.get("mounts", [])]
    parts += [f"device {d.get('path')}" for d in linux.get("devices", [])]
    parts += [f"annotation {k}" for k in adjust.get("annotations", {})]
    parts += [f"hook {k}" for k in adjust.get("hooks", {})]
    parts += [f"rlimit {r.get('type')}={r.get('hard')}" for r in adjust.get("rlimits", [])]
    shown = {"linux", "env", "mounts", "annotations", "hooks", "rlimits"}
    parts += [k for k in adjust if k not in shown and k != "container_id"]
    return ", ".join(parts) or "(empty)"


def _resources(res: dict[str, Any]) -> list[str]:
    out = []
    cpu, mem = res.get("cpu", {}), res.get("memory", {})
    for key, label in (("cpus", "cpuset"), ("mems", "cpuset.mems"), ("shares", "cpu.shares"),
                       ("quota", "cfs_quota"), ("period", "cfs_period")):
        if key in cpu:
            out.append(f"{label}={cpu[key]}")
    if "limit" in mem:
        out.append(f"memory.limit={_bytes(mem['limit'])}")
    out += [f"{k}={v}" for k, v in res.get("unified", {}).items()]
    for key in ("rdt_class", "blockio_class"):
        if key in res:
            out.append(f"{key}={res[key]}")
    return out


def _effective(e: dict[str, Any]) -> str:
    res = e["resources"]
    cpu, mem = res.get("cpu", {}), res.get("memory", {})
    parts = [f"cpuset={cpu.get('cpus') or '-'}", f"shares={cpu.get('shares', '-')}",
             f"quota/period={cpu.get('quota', '-')}/{cpu.get('period', '-')}",
             f"memory={_bytes(mem['limit']) if 'limit' in mem else '-'}",
             *([f"swap={_bytes(mem['swap'])}"] if "swap" in mem else []),
             f"oom_score_adj={e['oom_score_adj']}", f"env={len(e['env'])}",
             f"mounts={len(e['mounts'])}", f"devices={len(e['devices'])}",
             f"hooks={sum(len(v) for v in e['hooks'].values())}", f"rlimits={len(e['rlimits'])}"]
    parts += [f"{k}={v}" for k, v in res.get("unified", {}).items()]
    parts += [f"sysctl {k}={v}" for k, v in e.get("sysctl", {}).items()]
    return " ".join(parts)


def _bytes(value: Any) -> str:
    n = int(value)
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n > 0 and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)
