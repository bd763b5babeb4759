"""containerd launches the bridge itself (pre-registered plugin, issue 13).

The bridge is put into containerd's ``plugin_path`` as ``NN-name`` (a two-line wrapper:
containerd starts it with no arguments, a bare environment and stdio on /dev/null, so the
wrapper names the interpreter and a log file), and its configuration into
``plugin_config_path`` as ``NN-name.conf``. containerd reads that file and sends it in
Configure; the bridge must take its webhooks from it. A configuration that does not parse
must be refused at Configure — in the bridge's log and in containerd's — and containerd
goes on without the plugin.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until

from .bridge_proc import LogLine
from .containerd import Containerd, ContainerdError
from .cri import CriClient
from .inspect_proc import environ_after_exec
from .policy_proc import BIN, REPO, PolicyServer
from .private_containerd import keep_log

pytestmark = pytest.mark.e2e

PLUGIN = "60-conf-bridge"  # index 60, name conf-bridge: the file name is the identity


class Launched:
    """The plugin file, its conf.d file and the log the wrapper points the bridge at."""

    def __init__(self, containerd: Containerd) -> None:
        self.containerd = containerd
        self.workdir = Path(tempfile.mkdtemp(prefix="launched-", dir=containerd.dirs.base))
        self.log = self.workdir / "bridge.log"
        self.plugin = containerd.dirs.subdir("nri-plugins") / PLUGIN
        self.conf = containerd.dirs.subdir("nri-conf") / f"{PLUGIN}.conf"

    def install(self, conf: str) -> None:
        # No PATH or PYTHONPATH in a launched plugin's environment: absolute paths only.
        self.plugin.write_text(
            "#!/bin/sh\n"
            f"cd {REPO}\n"
            f"exec {BIN / 'nri-webhook-bridge'} run --log-file {self.log} --log-format json"
            " --log-level debug --control-socket ''\n"
        )
        self.plugin.chmod(0o755)
        self.conf.write_text(conf)
        self.containerd.restart()  # plugins are discovered only when NRI starts

    def uninstall(self) -> None:
        self.plugin.unlink(missing_ok=True)
        self.conf.unlink(missing_ok=True)

    def lines(self) -> list[LogLine]:
        if not self.log.exists():
            return []
        out = []
        for text in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(text))
            except ValueError:
                continue
        return out


@pytest.fixture
def launched(containerd: Containerd, cri: CriClient,
             request: pytest.FixtureRequest) -> Iterator[Launched]:
    item = Launched(containerd)
    try:
        yield item
    finally:
        if containerd.running():
            cri.remove_all()
        item.uninstall()
        name = request.node.name.replace("/", "_")
        keep_log(item.log, f"{name}-bridge.log")
        if containerd.running():
            containerd.restart()  # back to no launched plugin for the next test
            cri.wait_ready()


def test_containerd_launches_the_bridge_configured_from_conf_d(
    containerd: Containerd, cri: CriClient, launched: Launched
) -> None:
    policy = PolicyServer(launched.workdir / "policy",
                          policy_modules=(REPO / "examples" / "label_env_policy.py",),
                          koordinator=False)
    policy.start()
    try:
        policy.wait_healthy()
        offset = containerd.log_size()
        conf = {"webhooks": [{"name": "label-env", "url": policy.url("label-env"),
                              "events": ["CreateContainer"], "failure_policy": "Fail"}]}
        launched.install(json.dumps(conf))  # JSON is YAML
        cri.wait_ready()
        assert f"{PLUGIN}" in containerd.log_since(offset)
        # containerd names the plugin when it launches it; the bridge logs its configuration
        # once Configure reached it, which a busy machine can put a few seconds later.
        configured = wait_until(
            lambda: [x for x in launched.lines()
                     if x.get("msg") == "configured from the runtime's configuration string"],
            what="the launched bridge's configuration in its log", timeout_s=30,
            details=lambda: str(launched.lines())[-2000:])
        assert configured[0].get("webhooks") == ["label-env"], launched.lines()
        pod = cri.run_pod("launched", labels={"example.com/team": "payments"})
        container_id = cri.run_container(pod)
        env = environ_after_exec(cri.container_pid(container_id))
        assert env.get("TEAM") == "payments", sorted(env)
        calls = [x for x in launched.lines()
                 if x.get("webhook") == "label-env" and x.get("event") == "CreateContainer"]
        assert calls and calls[-1].get("outcome") == "ok", calls
    finally:
        policy.stop()
        keep_log(policy.log, "launched-policy.log")


def test_a_bad_conf_d_file_is_refused_at_configure(
    containerd: Containerd, cri: CriClient, launched: Launched
) -> None:
    """The bridge refuses Configure with the offending key, in its log and in containerd's.

    What containerd then does differs by version. 2.1.9 logs "failed to start
    pre-installed NRI plugin" with our reason and goes on without the plugin. 1.7.24
    treats it as fatal: NRI start-up fails, and with it the CRI service ("Failed to run
    CRI service ... failed to configure plugin"), so containerd exits. Hence
    docs/deployment.md: check a conf.d file with `nri-webhook-bridge validate-config`
    before installing it.
    """
    offset = containerd.log_size()
    bad = "webhooks:\n  - name: p\n    url: unix:///nowhere.sock/v1\n    timeout: soon\n"
    fatal = containerd.runtime.version.startswith("1.7")
    if fatal:
        with pytest.raises(ContainerdError):
            launched.install(bad)
    else:
        launched.install(bad)
    errors = [x for x in launched.lines() if x.get("level") == "error"]
    assert [e.get("key") for e in errors] == ["webhooks[0].timeout"], launched.lines()
    logged = containerd.log_since(offset)
    assert ("failed to configure plugin: rpc error: code = InvalidArgument desc = invalid "
            "plugin configuration: webhooks[0].timeout") in logged
    if fatal:
        assert "Failed to run CRI service" in logged
        launched.uninstall()
        containerd.start()  # without the plugin, containerd runs again
    else:
        assert 'failed to start pre-installed NRI plugin \\"conf-bridge\\"' in logged
    cri.wait_ready()
    pod = cri.run_pod("without-launched")  # fail-open: no plugin, pods still run
    assert cri.container_pid(cri.run_container(pod)) > 0
