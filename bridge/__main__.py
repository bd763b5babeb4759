"""`python -m bridge` and the `nri-webhook-bridge` script: the same CLI (bridge.cli), loaded
only once the stop signals are caught (bridge.process_setup.stop_signals): its imports take a good
part of a second, in which a SIGTERM used to end the process with the default action (exit -15)."""

from bridge.process_setup import stop_signals


def main() -> int:
    stop_signals.catch()
    stop_signals.checkpoint("entry")
    from bridge.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
