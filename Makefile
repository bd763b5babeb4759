# nri-webhook-bridge developer entry points. Everything installs into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The steps that install or fetch system tools share machine-wide state (apt sources, among
# them install-runtimes.sh's temporary sid source, apt's lists and dpkg): one at a time.
SETUP_LOCK := /run/nri-webhook-bridge-setup.lock
# Python's bytecode caches stay on, pytest's rewritten test modules among them: with
# PYTHONDONTWRITEBYTECODE set (this machine's image sets it) every run compiles ~700 modules
# again, about 8 s of each pytest worker's start (docs/performance.md#make-check).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup tools demo check test lint typecheck proto e2e shipped node-v2 bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# System tools the suite runs: kubectl (Debian's kubernetes-client) for tests/deploy; promtool
# (unpacked from Debian's prometheus package under tests/deploy/.build, not installed: the
# package would start a Prometheus) for the alerting rules in deploy/prometheus; Debian's
# dbus-daemon for the system-bus tests (tests/policy_server/node/test_systemd_bus.py); for the
# conformance matrix (tests/servers) Debian's Go 1.24 builds the Go policy and Debian's nginx
# binary is unpacked, both under tests/servers/*/.build (nothing installed system-wide).
tools:
	flock $(SETUP_LOCK) bash tests/setup/trixie-source.sh
	flock $(SETUP_LOCK) bash tests/setup/install-dbus-daemon.sh
	flock $(SETUP_LOCK) bash tests/deploy/setup/install-kubectl.sh
	flock $(SETUP_LOCK) bash tests/deploy/setup/fetch-promtool.sh >/dev/null
	bash tests/servers/gopolicy/build.sh >/dev/null
	flock $(SETUP_LOCK) bash tests/servers/nginx/fetch.sh >/dev/null

# Regenerate bridge/proto/nri/*_pb2.py and their *_pb2.pyi type stubs from schemas/nri/*.proto.
proto: $(STAMP)
	$(BIN)/python -m bridge.proto.generate

demo: $(STAMP)
	$(BIN)/python -m bridge.demo

lint: $(STAMP)
	$(BIN)/ruff check bridge policy_server tests benchmarks examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy bridge policy_server tests benchmarks

# The check to run before each commit: lint, types, import contracts and the in-process tests
# (no root, no apt, no tool from `make tools`, no process started: a module that starts one
# says `pytestmark = pytest.mark.processes`, tests/in_process.py), on two workers (xdist).
# Its time on this machine: docs/performance.md#make-check.
IN_PROCESS := not processes and not e2e and not shipped and not node_v2

check: $(STAMP) lint typecheck
	$(BIN)/pytest -q -n 2 -m '$(IN_PROCESS)'

# The whole suite (unit + integration), plus lint and type checks: everything `make check`
# runs, each once (its in-process tests are among the suite's), and the rest, on two workers as
# well: every test has its own sockets, ports (0) and directories, waits on events rather than
# clocks, and bounds only what a neighbour cannot move (docs/performance.md#make-test).
test: $(STAMP) tools lint typecheck
	$(BIN)/pytest -q -n 2

# Real containerd end-to-end tests (needs root; installs containerd 1.7.24 and 2.1.9).
# e2e and shipped may run side by side (also from one checkout): every run has its own
# containerd instances, sockets, state and root directories under a private /tmp base, and its
# own pod cgroup prefix /nri-e2e-<run id> (tests/e2e/cgroup_scope.py), and cleans up only that.
# Only the installation steps share machine-wide state: they take SETUP_LOCK (above).

e2e: $(STAMP)
	flock $(SETUP_LOCK) bash tests/e2e/setup/install-runtimes.sh
	$(BIN)/pytest -q -m e2e tests/e2e -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_policy.py
	$(BIN)/python benchmarks/bench_http_client.py
	$(BIN)/python benchmarks/bench_webhook.py
	$(BIN)/python benchmarks/bench_node_scale.py
	$(BIN)/python benchmarks/bench_suite.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

# The image, the DaemonSet pod, the compose pair and the systemd units run as shipped
# (needs root; installs podman, debootstrap, kubectl and both containerds).
shipped: $(STAMP)
	flock $(SETUP_LOCK) bash tests/shipped/setup/install-tools.sh
	$(BIN)/pytest -v -rxX -s -m shipped tests/shipped -p no:cacheprovider

# The node Kubernetes now requires: cgroup v2, systemd as PID 1 and the systemd cgroup driver,
# containerd 2.1.9 over runc 1.3 and 1.1, in a Debian trixie guest under QEMU (needs root;
# the guest image is built from Debian packages once per machine and recipe). The tests
# under tests/node_v2 run inside it; results come back in .e2e/node-v2/. The host's step
# before the boot exports the shipped image (built as make shipped builds it, only when no
# image of these sources exists; minutes the first time), the rendered production overlay and
# the CNI plugins for the guest's DaemonSet test (tests/node_v2/shipped_export.py).
node-v2: $(STAMP)
	flock $(SETUP_LOCK) bash tests/shipped/setup/install-tools.sh
	flock $(SETUP_LOCK) bash tests/node_v2/setup/install-tools.sh
	$(BIN)/python -m tests.node_v2.shipped_export
	bash tests/node_v2/setup/run-guest.sh tests/node_v2
