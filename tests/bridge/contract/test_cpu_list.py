"""The one CPU-list grammar (bridge.contract.cpu_list_grammar): the bridge's reply check and
the policy SDK agree on every input, and the whitespace rule holds on both sides."""

from __future__ import annotations

import pytest

from bridge.contract import cpu_list_grammar
from bridge.webhooks.values import ValueProblem, check_cpuset
from policy_server import sdk

GOOD = ["0", "0-3", "0-3,8", "1,3,5-7", "65535", "0-65535", "2-2", "0007"]
BAD = ["", "a", "0-", "-1", "3-1", "0,,1", "1,", ",1", "1-2-3", "65536", "0-65536",
       "0-4294967296", "9" * 5000, "0 - 3", "0, 1", " 0-3", "0-3 ", "0-3\n", "\t1", "٣"]


@pytest.mark.parametrize("text", GOOD)
def test_lists_both_products_accept(text: str) -> None:
    cpu_list_grammar.check_cpu_list_syntax(text)
    check_cpuset(text, "cpus")
    assert sdk.check_cpu_list(text) == text
    assert sdk.parse_cpu_list(text) == cpu_list_grammar.parse_cpu_list(text)


@pytest.mark.parametrize("text", BAD)
def test_lists_both_products_refuse(text: str) -> None:
    with pytest.raises(cpu_list_grammar.CpuListError):
        cpu_list_grammar.check_cpu_list_syntax(text)
    with pytest.raises(ValueProblem, match=r"^cpus: invalid (cpuset|range)"):
        check_cpuset(text, "cpus")
    if text.strip() == text:  # the SDK strips the ends only (text from files and configs)
        with pytest.raises(ValueError):
            sdk.check_cpu_list(text)


def test_the_sdk_strips_only_the_ends() -> None:
    assert sdk.check_cpu_list(" 2-3\n") == "2-3"
    for inside in ("0, 1", "0 - 3", " 0,\t1 "):
        with pytest.raises(ValueError, match="invalid cpu list"):
            sdk.check_cpu_list(inside)
    assert sdk.parse_cpu_list is cpu_list_grammar.parse_cpu_list
    assert sdk.format_cpu_list is cpu_list_grammar.format_cpu_list


def test_parse_and_format_round_trip() -> None:
    assert cpu_list_grammar.parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert cpu_list_grammar.format_cpu_list({11, 0, 1, 2, 3, 8, 10}) == "0-3,8,10-11"
    assert cpu_list_grammar.canonical_cpu_list("0-7,8-15") == "0-15"
    assert cpu_list_grammar.format_cpu_list([]) == ""
    with pytest.raises(cpu_list_grammar.CpuListError) as bad:
        cpu_list_grammar.check_cpu_list_syntax("1,5-2")
    assert bad.value.element == "5-2"
