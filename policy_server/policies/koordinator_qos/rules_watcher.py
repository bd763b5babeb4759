"""The rules file: load it, poll it for changes, keep the last good version.

Owns the only I/O on the rules file. A change is detected by polling ``stat`` (mtime, size,
inode — a Kubernetes ConfigMap swaps a symlink, which changes the inode). An invalid new
version is rejected with the parser's error (naming the key) and the previous rules stay in
force; a valid one that parses to the same rules is not a change. No new dependency needed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from policy_server.sdk import ReloadResult, RulesError

log = logging.getLogger(__name__)

R = TypeVar("R")
__all__ = ["RULES_POLL_INTERVAL_S", "ReloadResult", "RulesSource", "watch"]

RULES_POLL_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class _Stamp:
    mtime_ns: int
    size: int
    inode: int


def _stamp(path: Path) -> _Stamp:
    st = os.stat(path)
    return _Stamp(st.st_mtime_ns, st.st_size, st.st_ino)


class RulesSource(Generic[R]):
    """The current rules of one policy, optionally backed by a file.

    ``parse`` turns file text into rules (raising ``RulesError``); ``stabilize(previous, new)``
    may keep parts of the previous rules (koordlet ignores tiny ratio changes).
    """

    def __init__(
        self,
        path: Path | None,
        parse: Callable[[str], R],
        default: R,
        stabilize: Callable[[R | None, R], R] | None = None,
    ) -> None:
        self.path = path
        self._parse = parse
        self._stabilize = stabilize
        self._current = default
        self._stamp: _Stamp | None = None
        self.generation = 0
        self.last_error: str | None = None

    @property
    def current(self) -> R:
        return self._current

    def _read(self) -> tuple[_Stamp, R]:
        assert self.path is not None
        try:
            stamp = _stamp(self.path)
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RulesError("", f"cannot read rules file {self.path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise RulesError("", f"rules file {self.path} is not UTF-8: {exc.reason}") from None
        try:
            return stamp, self._parse(text)
        except RulesError as exc:
            raise RulesError(exc.key, f"{exc.message} (in {self.path})") from None

    def load(self) -> None:
        """Initial load: raises ``RulesError`` (there are no previous rules to fall back on)."""
        if self.path is None:
            return
        stamp, rules = self._read()
        self._stamp = stamp
        self._current = rules
        self.generation = 1

    def poll(self) -> ReloadResult:
        """Reload if the file changed; never raises."""
        if self.path is None:
            return ReloadResult.UNCHANGED
        try:
            stamp = _stamp(self.path)
        except OSError as exc:
            return self._reject(f"cannot stat rules file {self.path}: {exc.strerror}", None)
        if stamp == self._stamp:
            return ReloadResult.UNCHANGED
        try:
            stamp, rules = self._read()
        except RulesError as exc:
            return self._reject(str(exc), stamp)
        self._stamp = stamp
        self.last_error = None
        if self._stabilize is not None:
            rules = self._stabilize(self._current, rules)
        if rules == self._current:
            return ReloadResult.UNCHANGED
        self._current = rules
        self.generation += 1
        log.info("rules file %s applied (generation %d)", self.path, self.generation)
        return ReloadResult.APPLIED

    def _reject(self, message: str, stamp: _Stamp | None) -> ReloadResult:
        if stamp is not None:
            self._stamp = stamp  # do not re-report the same broken version every poll
        if message != self.last_error:
            log.error("rules rejected, previous rules stay in force: %s", message)
        self.last_error = message
        return ReloadResult.INVALID


async def watch(
    source: RulesSource[R],
    on_result: Callable[[ReloadResult], Awaitable[None]],
    stopped: Callable[[float], Awaitable[bool]],
    interval_s: float = RULES_POLL_INTERVAL_S,
) -> None:
    """Poll ``source`` every ``interval_s`` until ``stopped(interval_s)`` says the server stops
    (``PolicyHost.stopped``); report every poll's result."""
    while not await stopped(interval_s):
        result = await asyncio.to_thread(source.poll)
        try:
            await on_result(result)
        except Exception:
            log.exception("rules change handler failed")
