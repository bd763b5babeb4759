"""What an expectation names, checked before any case runs: a name or path that matches
nothing would let the expectation hold whatever the policy does.

Owns: per expectation, that its `pod` pattern matches a pod the case's manifests make, its
`container` pattern a container of those pods, its `webhook` a webhook under test (known at
load for `config`/`url`, once the private server has said what it serves for modules), and
every `adjust`/`effective` path one that some container can have (bridge.suite.paths).
Must not: run anything, or look at results (bridge.suite.expect).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from bridge.kube import CriPod
from bridge.strict_yaml import Path, line_of
from bridge.suite import paths
from bridge.suite.document import Expectation
from bridge.suite.expect import pod_matches
from bridge.suite.problems import Problem


def names_problems(expect: Sequence[Expectation], pods: Sequence[CriPod], case_index: int,
                   lines: dict[Path, int]) -> list[Problem]:
    """Pod and container patterns that match nothing the case's manifests make, and paths no
    container can have."""
    out: list[Problem] = []
    all_pods = [f"{p.namespace}/{p.name}" for p in pods]
    for i, e in enumerate(expect):
        loc: Path = ("cases", case_index, "expect", i)
        field = f"cases[{case_index}].expect[{i}]"
        chosen = [p for p in pods if pod_matches(e.pod, f"{p.namespace}/{p.name}")]
        if not chosen:
            out.append(Problem(f"{field}.pod", f"{e.pod!r} matches no pod of the case "
                               f"(pods: {', '.join(all_pods)})", line_of(lines, (*loc, "pod"))))
        elif e.container is not None:
            names = list(dict.fromkeys(c.name for p in chosen for c in p.containers))
            if not any(fnmatchcase(n, e.container) for n in names):
                out.append(Problem(f"{field}.container",
                                   f"{e.container!r} matches no container of {e.pod} "
                                   f"(containers: {', '.join(names)})",
                                   line_of(lines, (*loc, "container"))))
        for kind, values in (("adjust", e.adjust), ("effective", e.effective)):
            for path in values or {}:
                why = paths.problem(kind, path)
                if why is not None:
                    out.append(Problem(f"{field}.{kind}.{path}", why,
                                       line_of(lines, (*loc, kind, path))))
    return out


def webhook_problems(cases: Iterable[tuple[int, Sequence[Expectation]]], webhooks: list[str],
                     lines: dict[Path, int]) -> list[Problem]:
    """Expectations naming a webhook that is not under test."""
    out: list[Problem] = []
    for case_index, expect in cases:
        for i, e in enumerate(expect):
            if e.webhook is None or e.webhook in webhooks:
                continue
            near = difflib.get_close_matches(e.webhook, webhooks, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            out.append(Problem(
                f"cases[{case_index}].expect[{i}].webhook",
                f"no webhook named {e.webhook!r} is under test; {hint}"
                f"(webhooks: {', '.join(webhooks)})",
                line_of(lines, ("cases", case_index, "expect", i, "webhook"))))
    return out
