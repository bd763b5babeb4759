"""How nri-policy-server says in a reply that a policy's handler raised: a bug, not a decision.

Owns: the note the server puts in a reply warning (failure policy Ignore) or reject reason
(Fail) for a handler that raised anything but a PolicyError — `<handler>: internal error
(<ExceptionType>: <message>)` — and finding those notes again in a reply, so that `try` and
`test` count such a reply as a failed webhook call, as they count a reply that is not JSON:
a policy that crashed said nothing about the pod. One declaration for both sides.
Must not: decide what the bridge does with such a reply in production (its reply is valid).
"""

from __future__ import annotations

import re
from typing import Any

INTERNAL_ERROR = "internal error"
_NOTE = re.compile(r"(?:^|; )(?P<handler>[^\s:;]+): internal error "
                   r"\((?P<error>[A-Za-z_][\w.]*: .*?)\)(?=$|; )")


def crash_note(handler: str, exc: BaseException) -> str:
    """What the server writes for `handler` having raised `exc`."""
    return f"{handler}: {INTERNAL_ERROR} ({type(exc).__name__}: {exc})"


def crashes(reply: dict[str, Any]) -> list[str]:
    """`handler raised ExceptionType: message` for every crash note in a reply's warnings and
    reject reason."""
    texts = [str(w) for w in reply.get("warnings") or []]
    reject = reply.get("reject")
    if isinstance(reject, dict):
        texts.append(str(reject.get("reason", "")))
    return [f"handler {m['handler']} raised {m['error']}"
            for text in texts for m in _NOTE.finditer(text)]
