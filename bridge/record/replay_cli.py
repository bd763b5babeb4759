"""The `replay` subcommand: arguments, the HTTP calls, the report and the exit code."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bridge.errors import ConfigError
from bridge.reply_review.replay import (
    ReplayInputError,
    ReplayOutcome,
    compare,
    load_cases,
    replay_body,
)
from bridge.webhooks.client import PolicyClient
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.specs import parse_duration, webhook_from_url

EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recordings", nargs="+", metavar="FILE",
                   help="JSONL files written by `nri-webhook-bridge record`")
    p.add_argument("--policy-url", required=True, metavar="URL",
                   help="policy to replay against: unix:///path.sock/http/path or http(s)://...")
    p.add_argument("--expected", metavar="FILE",
                   help="JSONL whose replies (matched by request uid) replace the recorded ones")
    p.add_argument("--timeout", default="2s", metavar="DURATION",
                   help="per-request timeout, e.g. 500ms or 2s (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="print only differences and the summary")


async def run_replay(args: argparse.Namespace) -> int:
    try:
        timeout_s = parse_duration(args.timeout)
        spec = webhook_from_url(args.policy_url)
        cases = load_cases([Path(p) for p in args.recordings],
                           Path(args.expected) if args.expected else None)
    except (ConfigError, ReplayInputError) as exc:
        print(f"replay: {exc}")
        return EXIT_USAGE
    if not cases:
        print("replay: the recordings hold no events")
        return EXIT_USAGE
    client = PolicyClient(spec)
    outcomes: list[ReplayOutcome] = []
    try:
        for case in cases:
            try:
                reply = await client.post(replay_body(case.request, int(timeout_s * 1000)),
                                          timeout_s)
            except WebhookFailure as exc:
                outcomes.append(ReplayOutcome(case, None, f"{exc.kind.value}: {exc.reason}", ""))
            else:
                outcomes.append(compare(case, reply))
            _print(outcomes[-1], args.quiet)
    finally:
        await client.aclose()
    failed = [o for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed")
    return EXIT_OK if not failed else EXIT_DIFFERENT


def _print(outcome: ReplayOutcome, quiet: bool) -> None:
    request = outcome.case.request
    label = f"{request.get('event', '?')} {_who(request)} ({outcome.case.where})"
    if outcome.error:
        print(f"ERROR {label}: {outcome.error}")
    elif outcome.diff:
        print(f"DIFF  {label}\n{outcome.diff}")
    elif not quiet:
        print(f"ok    {label}")


def _who(request: dict[str, object]) -> str:
    pod = request.get("pod")
    container = request.get("container")
    name = ""
    if isinstance(pod, dict):
        name = f"{pod.get('namespace', '')}/{pod.get('name', '')}"
    if isinstance(container, dict):
        name += f"/{container.get('name', '')}"
    return name or "-"


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run_replay(args))
