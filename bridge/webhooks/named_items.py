"""Items a webhook may not set by default, even inside a kind it is allowed: by name.

A kind (`resources`, `env`, `annotations`) is too coarse for some of what it carries: a
`unified` key can be any cgroup file, an annotation can steer the runtime, an environment
variable can change which code a process loads or where its traffic goes. This module names
those items, each class with its reason (docs/configuration.md#items-refused-by-default):

- `unified`: only the interface files of the cgroup v2 resource controllers (the kernel's
  Documentation/admin-guide/cgroup-v2.rst: cpu, cpuset, io, memory, pids, rdma, hugetlb, misc);
  never the core `cgroup.*` files (cgroup.procs moves processes, cgroup.subtree_control turns
  controllers off, cgroup.kill kills) nor an unknown prefix;
- `annotations`: the keys container runtimes, OCI runtimes, VM runtimes and device hooks act on
  (`RUNTIME_ANNOTATIONS`); a removal (`-key`) counts;
- `env`: the names that change what a process loads or where it connects (`LOADING_ENV`,
  `ROUTING_ENV`) and the ones runtime hooks act on (`HOOK_ENV`); a removal does not count (it
  takes back what the pod spec set, and loads or routes nothing new).

An operator allows one item by naming it in the webhook's `allow` list as `<class>:<name>`
(`env:NVIDIA_VISIBLE_DEVICES`, `annotations:run.oci.keep_original_groups`,
`unified:cgroup.procs`); a trailing `*` allows every name with that prefix
(`annotations:nvidia.com/*`). The kind itself must be allowed too (bridge.webhooks.kinds).

Owns the tables and `refusal`. Must not: know about replies or containers (the guard walks
the reply, bridge.webhooks.guard) or do I/O.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

# The cgroup v2 controllers with interface files (cgroup-v2.rst, "Controllers"); the device
# and perf_event controllers have none. A key is `<controller>.<file>`.
RESOURCE_CONTROLLERS = frozenset({"cpu", "cpuset", "io", "memory", "pids", "rdma", "hugetlb",
                                  "misc"})


@dataclass(frozen=True, slots=True)
class Pattern:
    """A name rule: `prefix` (the name starts with it), or `domain` (the key's DNS part, before
    any `/`, is this domain or a subdomain of it), or `suffix`; `exact` for one name."""

    text: str
    how: str  # "prefix" | "domain" | "suffix" | "exact"
    reason: str

    def matches(self, name: str) -> bool:
        if self.how == "prefix":
            return name.startswith(self.text)
        if self.how == "suffix":
            return name.endswith(self.text)
        if self.how == "domain":
            head = name.partition("/")[0]
            return head == self.text or head.endswith("." + self.text)
        return name == self.text


_RUNTIME = "the container runtime acts on it"
_OCI = "the OCI runtime acts on it"
RUNTIME_ANNOTATIONS: tuple[Pattern, ...] = (
    # containerd's CRI plugin writes these (sandbox id, container type, ...) and shims, runc
    # grouping and gVisor read them; io.kubernetes.cri.untrusted-workload picked a runtime.
    Pattern("io.kubernetes.", "prefix", _RUNTIME + " (containerd CRI, CRI-O: identity, "
            "sandbox and runtime selection)"),
    Pattern("io.containerd.", "prefix", _RUNTIME + " (containerd shims)"),
    Pattern("io.containers.", "prefix", _RUNTIME + " (CRI-O, podman)"),
    Pattern("io.podman.", "prefix", _RUNTIME + " (podman)"),
    Pattern("crio.io", "domain", _RUNTIME + " (CRI-O cpu-quota, cpu-load-balancing, ...)"),
    Pattern("run.oci.", "prefix", _OCI + " (crun: groups, seccomp, hooks, handlers)"),
    Pattern("org.systemd.", "prefix", _OCI + " (runc and crun: systemd unit properties)"),
    Pattern("org.opencontainers.", "prefix", _OCI + " (the OCI's reserved namespace)"),
    Pattern("io.katacontainers.", "prefix", "the VM runtime acts on it (kata: hypervisor, "
            "kernel and agent configuration)"),
    Pattern("dev.gvisor.", "prefix", "the sandbox runtime acts on it (gVisor runsc flags and "
            "mounts)"),
    Pattern("module.wasm.image", "domain", _OCI + " (crun and runwasi: the wasm handler)"),
    Pattern("nvidia.com", "domain", "NVIDIA's runtime and device plugins act on it"),
    Pattern("cdi.k8s.io", "domain", "CDI-aware runtimes inject the devices it names"),
    Pattern("noderesource.dev", "domain", "NRI plugins act on it (devices, mounts, hooks, "
            "tolerate-missing-nri-plugins)"),
    Pattern("seccomp.security.alpha.kubernetes.io", "domain", "it selects a seccomp profile"),
    Pattern("seccomp.security.beta.kubernetes.io", "domain", "it selects a seccomp profile"),
    Pattern("apparmor.security.beta.kubernetes.io", "domain", "it selects an AppArmor profile"),
)

_LOADS = "it changes which code the process loads"
LOADING_ENV: tuple[Pattern, ...] = (
    Pattern("LD_", "prefix", _LOADS + " (the dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, "
            "LD_AUDIT)"),
    Pattern("GLIBC_TUNABLES", "exact", _LOADS + " (glibc tunables)"),
    Pattern("GCONV_PATH", "exact", _LOADS + " (glibc iconv modules)"),
    Pattern("PATH", "exact", "it changes which executable a command name runs"),
    *(Pattern(name, "exact", _LOADS + " (interpreter start-up hook)") for name in (
        "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PERL5LIB", "PERL5OPT",
        "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "BASH_ENV", "ENV", "PHPRC")),
)
_ROUTES = "it changes where the process connects or whom it trusts"
ROUTING_ENV: tuple[Pattern, ...] = (
    Pattern("_PROXY", "suffix", _ROUTES + " (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY)"),
    Pattern("_proxy", "suffix", _ROUTES + " (http(s)_proxy, all_proxy, no_proxy)"),
    *(Pattern(name, "exact", _ROUTES + " (TLS trust store)") for name in (
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS")),
    *(Pattern(name, "exact", _ROUTES + " (name resolution)") for name in (
        "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN")),
)
HOOK_ENV: tuple[Pattern, ...] = (
    Pattern("NVIDIA_", "prefix", "the NVIDIA container runtime hook injects the GPUs, driver "
            "libraries and capabilities it names"),
    *(Pattern(name, "exact", "a vendor's container runtime hook injects the devices it names")
      for name in ("AMD_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES")),
)
ENV_RULES = (*LOADING_ENV, *ROUTING_ENV, *HOOK_ENV)

CLASSES = ("unified", "annotations", "env")  # the `<class>:` of a named allow entry


def unified_refusal(key: str) -> str | None:
    controller = key.split(".", 1)[0]
    if controller == "cgroup":
        return "a core cgroup file (it moves, kills or re-delegates processes, not resources)"
    if controller not in RESOURCE_CONTROLLERS:
        return (f"not a file of a cgroup v2 resource controller "
                f"({', '.join(sorted(RESOURCE_CONTROLLERS))})")
    return None


def named_item_refusal(cls: str, name: str, allow: Collection[str]) -> str | None:
    """Why `name` of class `cls` is refused under `allow`, or None if it may be set."""
    if cls == "unified":
        reason = unified_refusal(name)
    else:
        rules = RUNTIME_ANNOTATIONS if cls == "annotations" else ENV_RULES
        reason = next((rule.reason for rule in rules if rule.matches(name)), None)
    if reason is None or allowed_by_name(cls, name, allow):
        return None
    return reason


def allowed_by_name(cls: str, name: str, allow: Collection[str]) -> bool:
    exact = f"{cls}:{name}"
    if exact in allow:
        return True
    head = f"{cls}:"
    return any(entry.endswith("*") and entry.startswith(head)
               and name.startswith(entry[len(head):-1]) for entry in allow)
