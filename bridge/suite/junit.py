"""JUnit XML for `nri-webhook-bridge test --junit FILE`, as CI systems read it.

Owns: one <testsuites> with one <testsuite> per suite file and one <testcase> per case; a
failed expectation is a <failure> whose text is the diff the terminal shows, a case that could
not run (or whose webhook call failed) an <error>. Counts and times on every level.
Must not: run anything or decide exit codes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from bridge.suite.run import CaseResult


def document(results: Sequence[CaseResult]) -> ET.ElementTree[ET.Element]:
    root = ET.Element("testsuites", name="nri-webhook-bridge test")
    by_suite: dict[str, list[CaseResult]] = {}
    for result in results:
        by_suite.setdefault(result.suite.path, []).append(result)
    for path, cases in by_suite.items():
        suite = ET.SubElement(root, "testsuite", name=cases[0].suite.name, file=path)
        for case in cases:
            element = ET.SubElement(suite, "testcase", name=case.name, classname=path,
                                    file=path, time=f"{case.duration_s:.3f}")
            if case.error is not None:
                ET.SubElement(element, "error", message=case.error).text = case.error
            if case.mismatches:
                text = "\n".join(m.render(indent="") for m in case.mismatches)
                ET.SubElement(element, "failure",
                              message=f"{len(case.mismatches)} expectation(s) not met").text = text
        _count(suite, cases)
    _count(root, results)
    return ET.ElementTree(root)


def _count(element: ET.Element, cases: Sequence[CaseResult]) -> None:
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(1 for c in cases if c.error is None and c.mismatches)))
    element.set("errors", str(sum(1 for c in cases if c.error is not None)))
    element.set("time", f"{sum(c.duration_s for c in cases):.3f}")


def write(results: Sequence[CaseResult], path: str) -> None:
    tree = document(results)
    ET.indent(tree)
    tree.write(Path(path), encoding="utf-8", xml_declaration=True)
