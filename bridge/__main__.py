"""`python -m bridge` runs the same CLI as `nri-webhook-bridge`."""

from bridge.cli import main

raise SystemExit(main())
