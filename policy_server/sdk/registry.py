"""The policy SDK: a ``Policy`` collects handlers registered by decorator; a ``Registry``
names policies.

A handler is a plain function, event in, decision out, no I/O::

    policy = Policy("label-env")

    @policy.on(EventName.CREATE_CONTAINER)
    def inject(event: Event) -> Decision | None:
        ...

A policy that reads configuration declares a ``context`` provider; its handlers then take the
context snapshot as a second argument (``def h(event, rules)``), so they stay pure and testable.
A handler or observer that declares a keyword-only ``node`` parameter (``def h(event, *, node)``)
also gets the read-only ``NodeView`` of the node's pods and containers. Handlers of one policy
run in registration order and their outputs are merged.

A policy whose handlers read only the request's envelope and ``event.body`` (they decode what
they need themselves) says so with ``Policy(..., payload=Payload.BODY)``: its handlers then get
an ``Event`` whose typed payload (pod, container, linux_resources, pods, containers, adjust,
update, owners, plugins) is left at its defaults, and the server does not build it for requests
to that policy. Default: ``Payload.TYPED``, every field set. ``Registry.reads_node`` says whether
any policy reads the node view (a handler or observer taking ``node``): the engine keeps the view
only then.

State a policy keeps between events is registered with ``Policy.state`` (a ``PolicyState``:
``snapshot()``/``restore()``): the engine then answers a dry-run request (``dry_run: true``: a
shadow-mode webhook, ``replay``, ``try``) from a separate dry-run copy, so a dry run never
changes what a real request sees. What a policy may have besides handlers (a background task,
a state description, a reconcile hook, node needs, its own counters) is registered with the
decorators ``background``, ``describe``, ``config_status``, ``reconcile``, ``node_needs`` and
``counters``
(``sdk.extension``). Must not import web frameworks or the engine.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, overload

from bridge.contract.catalogue import EventName
from policy_server.exceptions import PolicyLoadError, UnknownPolicyError
from policy_server.sdk.decision import Decision
from policy_server.sdk.extension import (
    NO_EXTENSIONS,
    BackgroundTask,
    ConfigHook,
    CountersHook,
    Extensions,
    NeedsHook,
    ReconcileHook,
    StateDescription,
)
from policy_server.sdk.model import Event
from policy_server.sdk.node_view import NodeState, NodeView

C = TypeVar("C")
H = TypeVar("H", bound=Callable[..., Decision | None])
Obs = TypeVar("Obs", bound=Callable[..., None])
S = TypeVar("S", bound="PolicyState")
B = TypeVar("B", bound=BackgroundTask)
D = TypeVar("D", bound=StateDescription)
CH = TypeVar("CH", bound=ConfigHook)
RH = TypeVar("RH", bound=ReconcileHook)
NH = TypeVar("NH", bound=NeedsHook)
CO = TypeVar("CO", bound=CountersHook)
Observer = Callable[[Event, NodeView], None]

_POLICY_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


class Payload(StrEnum):
    """What of a request a policy's handlers read (``Policy(..., payload=...)``).

    ``TYPED``: the ``Event``'s typed objects (pod, container, ...), built for every request.
    ``BODY``: only the envelope (name, uid, api_version, runtime_*, budget_ms, dry_run) and
    ``event.body``, the request as received; the typed objects stay at their defaults.
    """

    TYPED = "typed"
    BODY = "body"


class FailurePolicy(StrEnum):
    """What a handler failure means, as koordlet's ``--runtime-hooks-plugin-failure-policy``."""

    IGNORE = "Ignore"  # report a warning, keep whatever the other handlers decided
    FAIL = "Fail"  # reject the operation


@dataclass(frozen=True, slots=True)
class HandlerSpec(Generic[C]):
    """One registered handler, normalised to take ``(event, context)``.

    ``with_node`` is set instead when the handler wants the node view: the engine then calls
    ``with_node(event, context, view)`` (kept apart so plain handlers pay no extra call).
    """

    name: str
    events: frozenset[EventName]
    call: Callable[[Event, C], Decision | None]
    with_node: Callable[[Event, C, NodeView], Decision | None] | None = None


class PolicyState(Protocol):
    """State a policy keeps between events (what its observers change).

    ``snapshot()`` returns a value that does not change when the state does (an immutable
    value, or a copy); ``restore(snapshot)`` puts the state back to it, in place (handlers hold
    the object itself)."""

    def snapshot(self) -> object: ...

    def restore(self, snapshot: object) -> None: ...


def _positional_arity(fn: Callable[..., object]) -> int:
    params = inspect.signature(fn).parameters.values()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds)


def _wants_node(fn: Callable[..., object], policy: str) -> bool:
    param = inspect.signature(fn).parameters.get("node")
    if param is None:
        return False
    if param.kind is not inspect.Parameter.KEYWORD_ONLY:
        # Positional, it would silently receive the context instead.
        raise PolicyLoadError(
            f"policy {policy}: {getattr(fn, '__name__', fn)} must declare node keyword-only: "
            "def handler(event, *, node)"
        )
    return True


def _no_context() -> None:
    return None


class Policy(Generic[C]):
    """A named set of event handlers; see the module docstring."""

    @overload
    def __init__(
        self: Policy[None],
        name: str,
        *,
        description: str = "",
        failure_policy: FailurePolicy | Callable[[None], FailurePolicy] = ...,
        payload: Payload = ...,
    ) -> None: ...

    @overload
    def __init__(
        self,
        name: str,
        *,
        context: Callable[[], C],
        description: str = "",
        failure_policy: FailurePolicy | Callable[[C], FailurePolicy] = ...,
        payload: Payload = ...,
    ) -> None: ...

    def __init__(
        self,
        name: str,
        *,
        context: Callable[[], Any] = _no_context,
        description: str = "",
        failure_policy: FailurePolicy | Callable[[Any], FailurePolicy] = FailurePolicy.IGNORE,
        payload: Payload = Payload.TYPED,
    ) -> None:
        if not _POLICY_NAME.match(name):
            raise PolicyLoadError(
                f"policy name {name!r} must match {_POLICY_NAME.pattern} (it becomes a URL path)"
            )
        self.name = name
        self.description = description
        self.payload = Payload(payload)
        # True once a handler or observer takes the node view (``reads_node``).
        self.reads_node = False
        # Called when it starts reading the node view: the registries holding it.
        self._changed: list[Callable[[], None]] = []
        self._context: Callable[[], C] = context
        self._failure_policy = failure_policy
        self._handlers: list[HandlerSpec[C]] = []
        self._observers: list[tuple[frozenset[EventName], Observer]] = []
        self._by_event: dict[EventName, tuple[HandlerSpec[C], ...]] = {}
        self._states: list[PolicyState] = []
        self._extensions = NO_EXTENSIONS

    def on(self, *events: EventName | str, name: str | None = None) -> Callable[[H], H]:
        """Register the decorated function for ``events`` (at least one)."""
        if not events:
            raise PolicyLoadError(f"policy {self.name}: on() needs at least one event")
        wanted = frozenset(EventName(e) for e in events)

        def register(fn: H) -> H:
            arity = _positional_arity(fn)
            if arity not in (1, 2):
                raise PolicyLoadError(
                    f"policy {self.name}: handler {fn.__name__} must take (event) or "
                    f"(event, context), it takes {arity} positional parameters"
                )
            label = name or fn.__name__
            spec: HandlerSpec[C]
            if _wants_node(fn, self.name):
                with_node = _node_call(fn, arity)
                # ``call`` (for callers without a node) passes an empty view.
                spec = HandlerSpec(label, wanted, _without_node(with_node), with_node)
                self._mark_node_reader()
            else:
                spec = HandlerSpec(label, wanted, fn if arity == 2 else _drop_context(fn))
            self._handlers.append(spec)
            self._by_event.clear()
            return fn

        return register

    def observe(self, *events: EventName | str) -> Callable[[Obs], Obs]:
        """Register in-memory bookkeeping run before the handlers of ``events``.

        The one place a policy may keep state between events (e.g. remember values it saw at
        CreateContainer); observers must not do I/O and return nothing. Register what they
        change with ``state`` so that dry runs leave it alone. Like handlers, an observer may
        declare a keyword-only ``node`` parameter to get the node view (already updated with
        the event).
        """
        wanted = frozenset(EventName(e) for e in events)

        def register(fn: Obs) -> Obs:
            observer: Observer
            if _wants_node(fn, self.name):
                observer = lambda event, node: fn(event, node=node)  # noqa: E731
                self._mark_node_reader()
            else:
                observer = lambda event, _node: fn(event)  # noqa: E731
            self._observers.append((wanted, observer))
            return fn

        return register

    def _mark_node_reader(self) -> None:
        self.reads_node = True
        for changed in self._changed:
            changed()

    def state(self, kept: S) -> S:
        """Register ``kept`` as state of this policy (returned as is): dry-run requests are
        answered from their own copy of it and leave the real one as it was."""
        self._states.append(kept)
        return kept

    def snapshot_state(self) -> tuple[object, ...]:
        """Every registered state's snapshot (the engine's dry-run bookkeeping)."""
        return tuple(kept.snapshot() for kept in self._states)

    def restore_state(self, snapshots: tuple[object, ...]) -> None:
        for kept, snapshot in zip(self._states, snapshots, strict=True):
            kept.restore(snapshot)

    # --- extension points (sdk.extension) ---------------------------------------------------

    def background(self, fn: B) -> B:
        """Run ``async def fn(host)`` for as long as the server runs (one task per policy)."""
        self._extend("background", fn)
        return fn

    def describe(self, fn: D) -> D:
        """Serve ``fn()`` (a JSON-able mapping) as ``GET /v1/policies/{name}/state``."""
        self._extend("describe", fn)
        return fn

    def config_status(self, fn: CH) -> CH:
        """``fn()`` says where the configuration comes from and how its last load went."""
        self._extend("config", fn)
        return fn

    def reconcile(self, fn: RH) -> RH:
        """Have the node reconciler re-evaluate this policy on every pass and carry out the
        ``NodePlan`` that ``fn(event)`` returns for the Synchronize the server builds itself."""
        self._extend("reconcile", fn)
        return fn

    def node_needs(self, fn: NH) -> NH:
        """``fn()`` says which node features the configuration in force asks for."""
        self._extend("needs", fn)
        return fn

    def counters(self, fn: CO) -> CO:
        """Export ``fn()`` (``CounterSample``s) on ``/metrics`` at each scrape."""
        self._extend("counters", fn)
        return fn

    def _extend(self, point: str, fn: Any) -> None:
        if getattr(self._extensions, point) is not None:
            raise PolicyLoadError(f"policy {self.name}: a second {point} hook registered")
        changes: dict[str, Any] = {point: fn}
        self._extensions = replace(self._extensions, **changes)

    @property
    def extensions(self) -> Extensions:
        return self._extensions

    @property
    def handlers(self) -> tuple[HandlerSpec[C], ...]:
        return tuple(self._handlers)

    @property
    def events(self) -> frozenset[EventName]:
        """Every event some handler or observer of this policy wants."""
        out: set[EventName] = set()
        for spec in self._handlers:
            out |= spec.events
        for wanted, _ in self._observers:
            out |= wanted
        return frozenset(out)

    def handlers_for(self, event: EventName) -> tuple[HandlerSpec[C], ...]:
        cached = self._by_event.get(event)
        if cached is None:
            cached = tuple(h for h in self._handlers if event in h.events)
            self._by_event[event] = cached
        return cached

    def observers_for(self, event: EventName) -> Iterator[Observer]:
        return (fn for wanted, fn in self._observers if event in wanted)

    def context(self) -> C:
        """A snapshot of the policy's configuration for one evaluation."""
        return self._context()

    def failure_policy(self, context: C) -> FailurePolicy:
        if isinstance(self._failure_policy, FailurePolicy):
            return self._failure_policy
        return self._failure_policy(context)


def _drop_context(
    fn: Callable[[Event], Decision | None],
) -> Callable[[Event, Any], Decision | None]:
    def call(event: Event, _context: Any) -> Decision | None:
        return fn(event)

    call.__name__ = getattr(fn, "__name__", "handler")
    return call


def _node_call(
    fn: Callable[..., Decision | None], arity: int
) -> Callable[[Event, Any, NodeView], Decision | None]:
    if arity == 1:
        return lambda event, _context, node: fn(event, node=node)
    return lambda event, context, node: fn(event, context, node=node)


def _without_node(
    with_node: Callable[[Event, Any, NodeView], Decision | None],
) -> Callable[[Event, Any], Decision | None]:
    empty = NodeState().view
    return lambda event, context: with_node(event, context, empty)


class Registry:
    """The policies a server exposes, by name, in registration order."""

    def __init__(self) -> None:
        self._policies: dict[str, Policy[Any]] = {}
        self._node_read: bool | None = None  # computed at the first ask after a change

    def add(self, policy: Policy[Any]) -> None:
        if policy.name in self._policies:
            raise PolicyLoadError(f"two policies are named {policy.name!r}")
        self._policies[policy.name] = policy
        policy._changed.append(self._forget)
        self._node_read = None

    def _forget(self) -> None:
        self._node_read = None

    @property
    def reads_node(self) -> bool:
        """Whether some policy reads the node view (a handler or observer taking ``node``):
        known from the registrations alone, recomputed after a policy is added or gains one."""
        reads = self._node_read
        if reads is None:
            reads = self._node_read = any(p.reads_node for p in self._policies.values())
        return reads

    def get(self, name: str) -> Policy[Any]:
        try:
            return self._policies[name]
        except KeyError:
            raise UnknownPolicyError(name) from None

    def __iter__(self) -> Iterator[Policy[Any]]:
        return iter(self._policies.values())

    def __len__(self) -> int:
        return len(self._policies)
