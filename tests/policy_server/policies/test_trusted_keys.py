"""policies.trusted_keys: the one declaration of the pod keys an admission policy guards."""

from __future__ import annotations

import pytest

from policy_server.policies import trusted_keys
from policy_server.policies.koordinator_qos import keys
from tests.deploy.admission_fixtures import is_guarded


def test_every_key_a_policy_reads_as_a_grant_is_declared() -> None:
    assert set(keys.TRUSTED_KEYS) <= set(trusted_keys.EXACT_KEYS)
    assert set(trusted_keys.ANNOTATION_DOMAINS) == {
        "devices.noderesource.dev", "mounts.noderesource.dev", "cdi-devices.noderesource.dev",
        "ulimits.noderesource.dev", "tolerate-missing-nri-plugins.noderesource.dev"}  # fmt: skip


@pytest.mark.parametrize(
    ("key", "guarded"),
    [
        ("koordinator.sh/qosClass", True),
        ("node.koordinator.sh/resctrl", True),
        ("devices.noderesource.dev/container.app", True),
        ("mounts.noderesource.dev/pod", True),
        ("cdi-devices.noderesource.dev/container.gpu", True),
        ("ulimits.noderesource.dev/pod", True),
        ("tolerate-missing-nri-plugins.noderesource.dev", True),
        ("tolerate-missing-nri-plugins.noderesource.dev/container.app", True),
        # Not a prefix of another domain, nor a look-alike.
        ("devices.noderesource.dev.evil/pod", False),
        ("xdevices.noderesource.dev/pod", False),
        ("koordinator.sh/qosclass", False),
        ("app", False),
    ],
)
def test_guarded(key: str, guarded: bool) -> None:
    assert is_guarded(key) is guarded
