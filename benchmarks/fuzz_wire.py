"""The long fuzz job for the wire decoders and the trunk (not part of the test run).

Two engines, run on demand:

- `hypothesis` (default): the properties of tests/hardening/test_wire_fuzz.py
  with many more examples (`--examples`, default 20,000 per property): the
  trunk answers hostile streams exactly as the protocol reference says, the
  decoders do not depend on how bytes are cut, the client settles each call
  by the first frame on its stream.
- `atheris` (coverage-guided, libFuzzer): raw bytes straight into the
  plugin's trunk. Checked on every input: nothing escapes `data_received`;
  every write is exactly one Response frame in the Go mux pattern, on conn 1,
  for a stream id that arrived as a Request; a closed connection says why;
  no task outlives the connection. atheris is not a project dependency:

      .venv/bin/pip install --target /tmp/atheris atheris
      PYTHONPATH=/tmp/atheris .venv/bin/python benchmarks/fuzz_wire.py --engine atheris \\
          -- -max_total_time=600

    .venv/bin/python benchmarks/fuzz_wire.py                      # hypothesis, 20,000 each
    .venv/bin/python benchmarks/fuzz_wire.py --examples 200000 -k trunk

Exit status: 0 if nothing was found, else the engine's (a failing example is
printed, shrunk, by hypothesis; atheris writes a crash-* file).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run_hypothesis(examples: int, selection: str | None) -> int:
    import pytest
    os.environ["NWB_FUZZ_EXAMPLES"] = str(examples)
    args = ["-q", "-p", "no:cacheprovider", "-o", "timeout=0",
            str(REPO / "tests" / "hardening" / "test_wire_fuzz.py"),
            "--hypothesis-show-statistics"]
    if selection:
        args += ["-k", selection]
    return int(pytest.main(args))


def one_input(data: bytes) -> None:
    """atheris target: feed `data` to a fresh plugin trunk in reads of up to 997 bytes."""
    from bridge.wire import envelope, mux, ttrpc
    from tests.hardening.memory import decode_write, other_tasks, plugin_trunk

    async def serve() -> None:
        trunk, transport, service = plugin_trunk(max_request_bytes=8192)
        for start in range(0, len(data), 997):
            if not trunk.is_open:
                break
            trunk.data_received(data[start:start + 997])
        async with asyncio.timeout(5):
            await trunk.server.idle()
        requested = _request_ids(data)
        for write in transport.writes:
            frame = decode_write(write, mux.PLUGIN_SERVICE_CONN)
            assert frame.type == ttrpc.MessageType.RESPONSE and frame.flags == 0
            assert frame.stream_id in requested, frame.stream_id
            envelope.decode_response(frame.data)
        if not trunk.is_open:
            assert trunk.close_reason.startswith("protocol violation: "), trunk.close_reason
        transport.close()
        await trunk.wait_closed()
        service.shutdown()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not other_tasks()

    asyncio.run(serve())


def _request_ids(data: bytes) -> set[int]:
    """Stream ids of every Request header on conn 1 (a superset of what may be answered)."""
    from bridge.errors import ProtocolError
    from bridge.wire import mux, ttrpc
    ids: set[int] = set()
    decoder = ttrpc.FrameDecoder(max_bytes=0)  # headers only: every body counts as oversized
    demux = mux.MuxDecoder()
    pieces: list[tuple[int, bytes]] = []
    try:
        for i in range(len(data)):  # byte by byte: keep every frame before a fatal header
            pieces += demux.feed(data[i:i + 1])
    except ProtocolError:
        pass
    for conn, payload in pieces:
        if conn == mux.PLUGIN_SERVICE_CONN:
            for frame in decoder.feed(payload):
                if frame.type == ttrpc.MessageType.REQUEST:
                    ids.add(frame.stream_id)
    return ids


def run_atheris(argv: list[str]) -> int:
    import logging

    import atheris  # type: ignore  # optional, not a project dependency
    logging.disable(logging.CRITICAL)  # hostile input is logged on every run
    atheris.instrument_all()
    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("hypothesis", "atheris"), default="hypothesis")
    parser.add_argument("--examples", type=int, default=20_000,
                        help="hypothesis examples per property")
    parser.add_argument("-k", dest="selection", help="only the properties matching this")
    parser.add_argument("libfuzzer", nargs="*", help="after --: arguments for libFuzzer")
    args = parser.parse_args()
    if args.engine == "atheris":
        return run_atheris(args.libfuzzer)
    return run_hypothesis(args.examples, args.selection)


if __name__ == "__main__":
    sys.exit(main())
