"""Writing a command's results to a pipe its reader may close early (`try --output json | head`).

Python ignores SIGPIPE, so a write to a pipe nobody reads raises BrokenPipeError, and the
interpreter's final flush of stdout raises it again: a traceback after `head` has its lines.
`reader_may_leave` ends the output quietly instead, the way a shell tool does: stdout is pointed
at /dev/null for the rest of the run (later writes and the final flush go nowhere) and the
command goes on to its exit code, which says what the trial found (`set -o pipefail` sees it).

Owns: that one rule for `try` and `test`. Must not: catch anything else, or touch stderr (the
messages there still reach whoever reads them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def reader_may_leave() -> Iterator[None]:
    """Run the block's writes to stdout, and flush them; a closed pipe ends them silently."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
