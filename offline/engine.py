"""A recording Pulumi engine: runs the real `__main__.py` under `pulumi.runtime.set_mocks` and keeps
every registration (type, name, parent, provider, dependencies, inputs, options) and the stack outputs.

Secret values are replaced by `[secret]` at the moment they are recorded, so nothing downstream (plan
files, test assertions, logs) ever holds them. Invokes the program may make are answered from
`offline/fakes.py`; an invoke without a canned answer fails loudly rather than returning a made-up shape.
A `pulumi.StackReference` (an experiment stack reading its platform) is answered with the outputs of the
referenced stack's own offline run, passed in as `stack_references`; its secret outputs stay `[secret]` and
are marked secret, as the real engine does. A reference nobody rendered fails loudly; a reference to the stack
itself reads `own_outputs` (its previous outputs; none on a fresh stack).

For a second run over a first one's state (offline/day2.py), `prior` maps URNs to the state a resource would
have after the first `up` (offline/readback.py): such a resource answers with that state, as an unchanged
resource does in a real preview. Each run keeps every resource's raw inputs and outputs in `Recording.raw`
(secrets still wrapped, never written anywhere) for that replay.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc
from pulumi.runtime import settings as psettings

from components.cloud.account_checks import OFFLINE_PLAN_ENV
from offline import fakes

SECRET = "[secret]"
UNKNOWN = "[unknown]"
_SIG = rpc._special_sig_key
_SECRET_SIG = rpc._special_secret_sig
_RESOURCE_SIG = rpc._special_resource_sig
_OUTPUT_SIG = rpc._special_output_value_sig
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"


def _hide(value: Any) -> Any:
    """A secret value with its shape kept: map keys (e.g. a Secret's `stringData` file names) stay readable,
    every leaf becomes `[secret]`, so a rendered Secret is still a valid object and reviewers see its keys."""
    if isinstance(value, dict) and value.get(_SIG) is None:
        return {k: _hide(v) for k, v in value.items()}
    return SECRET


def _redact(value: Any) -> Any:
    """Plain JSON from a deserialised protobuf value, with secrets and unknowns made visible placeholders."""
    if isinstance(value, dict):
        sig = value.get(_SIG)
        if sig == _SECRET_SIG:
            return _hide(value.get("value"))
        if sig == _RESOURCE_SIG:
            return value.get("urn")
        if sig == _OUTPUT_SIG:
            if value.get("secret"):
                return SECRET
            return _redact(value["value"]) if "value" in value else UNKNOWN
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    if value == rpc.UNKNOWN:
        return UNKNOWN
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf Struct numbers are doubles; manifests need integer ports and counts
    return value


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and (value.get(_SIG) == _SECRET_SIG
                                        or value.get(_SIG) == _OUTPUT_SIG and bool(value.get("secret")))


def _struct(struct) -> dict:
    return _redact(json_format.MessageToDict(struct, preserving_proto_field_name=True)) if struct else {}


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict
    options: dict
    id: str = ""

    @property
    def is_kubernetes(self) -> bool:
        return self.custom and self.type.startswith("kubernetes:") and not self.type.startswith("pulumi:providers")


@dataclass
class Recording:
    resources: list[Registration] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    secret_outputs: list[str] = field(default_factory=list)  # names of the stack outputs that are secrets
    # An experiment's platform run (offline/report/latency/ PlatformRun), set by plan.py; reports read it.
    platform: Any = None
    # The stack file the run's settings came from, set by plan.py; the checklist reads its `# replace` marks.
    stack_file: Any = None
    invokes: list[dict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    # urn -> RawState: what the program sent and the engine answered, unredacted (offline/day2.py replays it).
    raw: dict[str, RawState] = field(default_factory=dict)
    # A second run's resources that took over a `prior` state through an alias: new urn -> the old urn.
    moved: dict[str, str] = field(default_factory=dict)

    def by_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def get(self, type_: str, name: str) -> Registration:
        for r in self.resources:
            if r.type == type_ and r.name == name:
                return r
        raise KeyError(f"no {type_} named {name!r}; have: " +
                       ", ".join(f"{r.type}::{r.name}" for r in self.resources))

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.resources}


@dataclass
class RawState:
    """One resource as the state file would hold it: id, inputs and outputs as Python values, secrets still
    wrapped in Pulumi's secret signature (rpc.unwrap_rpc_secret reads them)."""

    id: str
    inputs: dict
    outputs: dict
    # The reasons a failed `up` recorded for a resource its provider created but could not initialise (a Kubernetes
    # object whose await failed: pulumi-kubernetes returns ErrorResourceInitFailed, the engine keeps InitErrors).
    init_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackOutputs:
    """What a StackReference reads: a stack's outputs (secrets already `[secret]`) and which are secret."""

    outputs: dict
    secret_output_names: list[str]

    @classmethod
    def of(cls, recording: Recording) -> StackOutputs:
        return cls(dict(recording.outputs), list(recording.secret_outputs))


# The organization the DIY (file/object-store) backend puts in every fully qualified stack name.
ORGANIZATION = "organization"
# How the backend reads a StackReference's name (pulumi/pulumi@1b5949891b pkg/backend/diy/store.go): the DIY
# backend's project layout takes <stack>, organization/<stack> or organization/<project>/<stack> (the organization
# must be "organization"; a missing project is the current one), its legacy layout (no projects: a bucket written
# before projects, or PULUMI_DIY_BACKEND_LEGACY_LAYOUT) only a bare stack name (tokens.ParseStackName), and Pulumi
# Cloud takes <org>/<project>/<stack>. The mock resolves a name to the fully qualified one `stack_references` is
# keyed by, or fails as the backend does.
BACKEND_LAYOUTS = ("project", "legacy", "cloud")
_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]*")


def backend_stack_name(name: str, layout: str, project: str) -> str:
    if layout == "legacy":
        end = _STACK_NAME.match(name).end()  # type: ignore[union-attr]
        if end != len(name):
            raise RuntimeError("a stack name may only contain alphanumeric, hyphens, underscores, or periods: "
                               f"invalid character {name[end]!r} at position {end}")
        return f"{ORGANIZATION}/{project}/{name}"
    if layout == "cloud":
        return name
    parts = name.split("/")
    org, proj, stack = {1: lambda: (ORGANIZATION, project, parts[0]), 2: lambda: (parts[0], project, parts[1])}.get(
        len(parts), lambda: tuple(parts))()
    if org != ORGANIZATION:
        raise RuntimeError("organization name must be 'organization'")
    return f"{org}/{proj}/{stack}"


class _Mocks(pmocks.Mocks):
    def __init__(self, recording: Recording, stack_references: dict[str, StackOutputs],
                 own: tuple[str, StackOutputs | None] = ("", None), layout: str = "project", project: str = ""):
        self.layout, self.project = layout, project
        self.recording = recording
        self.stack_references = stack_references
        self.own_name, self.own_outputs = own

    def new_resource(self, args: pmocks.MockResourceArgs):
        if args.typ == STACK_REFERENCE_TYPE:
            name = backend_stack_name(args.inputs.get("name") or args.resource_id, self.layout, self.project)
            if name.rsplit("/", 1)[-1] == self.own_name and name not in self.stack_references:
                own = self.own_outputs or StackOutputs({}, [])
                if isinstance(own, dict):  # plain outputs (tests): none of them secret
                    own = StackOutputs(own, [])
                return name, {"name": name, "outputs": own.outputs, "secretOutputNames": own.secret_output_names}
            if name not in self.stack_references:
                raise RuntimeError(f"offline engine: StackReference {args.name!r} reads stack {name!r}, which was not "
                                   f"rendered first (have: {sorted(self.stack_references) or 'none'})")
            ref = self.stack_references[name]
            return name, {"name": name, "outputs": ref.outputs, "secretOutputNames": ref.secret_output_names}
        read = fakes.account_read(args.typ, args.name, args.resource_id) if args.resource_id else None
        if read is not None:
            return args.resource_id, {**args.inputs, **read}
        outputs = dict(args.inputs)
        # A read (`Resource.get(name, id)`) keeps the id it asked for, as the real engine does, and its
        # canned outputs are derived from that id.
        known = {**args.inputs, "id": args.resource_id} if args.resource_id else args.inputs
        outputs.update(fakes.resource_outputs(args.typ, args.name, known))
        return args.resource_id or fakes.resource_id(args.typ, args.name, args.inputs), outputs

    def call(self, args: pmocks.MockCallArgs):
        self.recording.invokes.append({"token": args.token, "args": _redact(args.args), "provider": args.provider})
        return fakes.invoke(args.token, args.args)


class _Monitor(pmocks.MockMonitor):
    def __init__(self, mocks: _Mocks, recording: Recording, prior: dict[str, RawState]):
        super().__init__(mocks)
        self.recording = recording
        self.prior = prior
        self.stack_urn: str | None = None
        self.qualified: dict[str, str] = {}  # the mock's URN -> the engine's qualified type (qualified_type)
        self.old_urns: dict[str, list[str]] = {}  # the mock's URN -> its URNs before its (or a parent's) alias

    def _replay(self, request, state: RawState):
        # An unchanged resource in a real preview answers with its state's outputs, not with fresh ones.
        urn = self.make_urn(request.parent, request.type, request.name)
        self.resources[urn] = pmocks.MockMonitor.ResourceRegistration(urn, state.id, state.outputs)
        obj = pmocks._sync_await(rpc.serialize_properties(state.outputs, {}))
        return pmocks.resource_pb2.RegisterResourceResponse(urn=urn, id=state.id, object=obj)

    def _old_urns(self, request) -> list[str]:
        """The mock URNs the resource had before an alias moved it: its own aliases, and its name and type under
        each old URN of its parent (the engine derives a child's aliases from its parent's)."""
        old = []
        for alias in request.aliases:
            if alias.urn:
                old.append(alias.urn)
            else:
                spec = alias.spec
                parent = "" if spec.noParent else (spec.parentUrn or request.parent)
                old.append(self.make_urn(parent, spec.type or request.type, spec.name or request.name))
        old += [self.make_urn(p, request.type, request.name) for p in self.old_urns.get(request.parent, [])]
        return old

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        self.old_urns[urn] = self._old_urns(request)
        replayable = request.type not in ("pulumi:pulumi:Stack", STACK_REFERENCE_TYPE)
        # As the engine does: a resource new by its URN that an alias names takes over that alias's state.
        source = urn if urn in self.prior else next((u for u in self.old_urns[urn] if u in self.prior), None)
        replay = replayable and source is not None
        if replay and source != urn:
            self.recording.moved[urn] = source
        resp = self._replay(request, self.prior[source]) if replay else super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            self.stack_urn = resp.urn
            return resp
        self.qualified[resp.urn] = self.qualified_type(request.parent, request.type)
        self.recording.raw[resp.urn] = RawState(resp.id, rpc.deserialize_properties(request.object),
                                                dict(self.resources[resp.urn].state))
        self.recording.resources.append(Registration(
            urn=resp.urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent,
            provider=request.provider,
            dependencies=list(request.dependencies),
            property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
            inputs=_struct(request.object),
            id=resp.id,
            options={
                "protect": request.protect if request.HasField("protect") else None,
                "retain_on_delete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
                "ignore_changes": list(request.ignoreChanges),
                "replace_on_changes": list(request.replaceOnChanges),
                "delete_before_replace": request.deleteBeforeReplace,
                "deleted_with": request.deletedWith,
                "custom_timeouts": json_format.MessageToDict(request.customTimeouts) if request.HasField("customTimeouts") else {},
                "aliases": self._alias_urns(request),
            },
        ))
        return resp

    def qualified_type(self, parent: str, type_: str) -> str:
        """The type part of the URN the Pulumi engine gives a resource: every ancestor's type but the Stack's, then
        its own, joined by `$` (pulumi/pulumi sdk/go/common/resource/urn.go NewURN; the mock's own URNs keep only the
        parent's last type)."""
        chain = self.qualified.get(parent, "")
        return f"{chain}${type_}" if chain else type_

    def _alias_urns(self, request) -> list[str]:
        """The engine's URNs of what the resource's own `aliases` name: an unset name, type or parent in an alias
        spec is the resource's own (pulumi/pulumi proto/pulumi/alias.proto); an alias by URN is taken as it is."""
        out = []
        for alias in request.aliases:
            if alias.urn:
                out.append(alias.urn)
                continue
            spec = alias.spec
            parent = "" if spec.noParent else (spec.parentUrn or request.parent)
            stack, project = spec.stack or pulumi.get_stack(), spec.project or pulumi.get_project()
            out.append(f"urn:pulumi:{stack}::{project}::{self.qualified_type(parent, spec.type or request.type)}::"
                       f"{spec.name or request.name}")
        return sorted(out)

    def ReadResource(self, request):
        # `Resource.get(...)` reads an existing cloud object without managing it: recorded with
        # options.read = True (and the id read) so the plan shows it and tests can prove nothing owns it.
        resp = super().ReadResource(request)
        # A read is performed in a preview too (pulumi/pulumi pkg/resource/deploy/step.go ReadStep), and the real
        # engine gates an invoke on it (RESOURCE_MONITOR_FEATURE_INVOKE_DEPENDS_ON, source_eval.go :1034) instead of
        # the SDK skipping it while the read's id is unknown; the mock monitor lacks that feature, so the read answers
        # with its id and an invoke on its outputs (an experiment's cluster credential) runs as in a real preview.
        resp.id = self.resources[resp.urn].id or ""
        self.recording.resources.append(Registration(
            urn=resp.urn,
            type=request.type,
            name=request.name,
            custom=True,
            parent=request.parent,
            provider=request.provider,
            dependencies=list(request.dependencies),
            property_dependencies={},
            inputs=_struct(request.properties),
            options={"read": True, "id": request.id, "protect": None, "retain_on_delete": None, "ignore_changes": [],
                     "replace_on_changes": [], "delete_before_replace": False, "deleted_with": "",
                     "custom_timeouts": {}, "aliases": []},
        ))
        return resp

    def RegisterResourceOutputs(self, request):
        if self.stack_urn is not None and request.urn == self.stack_urn:
            self.recording.outputs = _struct(request.outputs)
            raw = json_format.MessageToDict(request.outputs) if request.outputs else {}
            self.recording.secret_outputs = sorted(k for k, v in raw.items() if _is_secret(v))
        return super().RegisterResourceOutputs(request)


class _LogCapture(logging.Handler):
    def __init__(self, recording: Recording):
        super().__init__(logging.DEBUG)
        self.recording = recording

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.recording.logs.append((record.levelname.lower(), record.getMessage()))


def run_program(program: Path, config: dict[str, str], secret_keys: list[str], *, project: str,
                stack: str, stack_references: dict[str, StackOutputs] | None = None,
                own_outputs: StackOutputs | dict | None = None, prior: dict[str, RawState] | None = None,
                offline_plan: bool = True, organization: str = ORGANIZATION,
                backend_layout: str | None = None) -> Recording:
    """Run `program` once under the recording engine and return what it registered.

    `config` maps full keys (`verl-ack:settings`) to string values, as the CLI would pass them.
    `stack_references` maps fully qualified stack names to the outputs a StackReference to them reads;
    `own_outputs` is what a StackReference to this stack itself reads (None: a fresh stack, no outputs);
    `prior` is the state of an earlier run (urn -> RawState) that unchanged resources answer with.
    `organization` is what pulumi.get_organization() returns: "organization", the name a self-managed (local or
    bucket) backend gives every stack, which the shipped stack files' platform_stack names use.
    `backend_layout` is how the backend parses a StackReference's name (BACKEND_LAYOUTS, `backend_stack_name`);
    None: the DIY project layout for the DIY organization, Pulumi Cloud's rule for any other.
    `offline_plan` marks the run as the offline plan (OFFLINE_PLAN_ENV): the program then renders the shipped
    placeholders and lists them instead of refusing them; tests pass False to see what a real preview does.
    """
    recording = Recording()
    logger = logging.getLogger(f"verl-ack.offline.{stack}")
    logger.propagate = False
    logger.handlers = [_LogCapture(recording)]
    backend_layout = backend_layout or ("project" if organization == ORGANIZATION else "cloud")
    assert backend_layout in BACKEND_LAYOUTS, backend_layout
    mocks = _Mocks(recording, dict(stack_references or {}), (stack, own_outputs), backend_layout, project)
    monitor = _Monitor(mocks, recording, dict(prior or {}))

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    previous_flag = os.environ.pop(OFFLINE_PLAN_ENV, None)
    if offline_plan:
        os.environ[OFFLINE_PLAN_ENV] = "1"
    pulumi.runtime.set_all_config(config, secret_keys)
    # A placeholder root keeps set_mocks from creating its own Stack; run_in_stack then creates the one
    # real Stack, exactly as the Pulumi language host does, and registers the exports on it.
    psettings.ROOT.set(object())  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True, logger=logger, monitor=monitor,
                             organization=organization)
    psettings.ROOT.set(None)
    try:
        loop.run_until_complete(pulumi.runtime.stack.run_in_stack(
            lambda: runpy.run_path(str(program), run_name="__main__")))
    finally:
        os.environ.pop(OFFLINE_PLAN_ENV, None)
        if previous_flag is not None:
            os.environ[OFFLINE_PLAN_ENV] = previous_flag
        pulumi.runtime.set_all_config({}, [])
        # A program that failed mid-run leaves RPC tasks (and executor threads) behind; end them here, so the
        # next run in this process starts clean instead of inheriting them.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        # The SDK keeps outstanding Output tasks in a process-wide set that it awaits at the end of a run; those of
        # a failed run (a refused create-only change) belong to this loop and would stall the next run.
        psettings.SETTINGS.outputs.clear()
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        asyncio.set_event_loop(None)
    _canonical_order(recording)
    return recording


def _canonical_order(recording: Recording) -> None:
    """Put the registrations in parent-tree order, siblings by type and name.

    The engine registers resources in whatever order their inputs resolve, which varies between runs; a
    reviewed plan must not reorder itself when nothing changed, so every report reads this order instead.
    """
    by_urn = recording.by_urn()

    def path(r: Registration) -> tuple:
        chain = []
        while r is not None:
            chain.append((r.type, r.name))
            r = by_urn.get(r.parent)
        return tuple(reversed(chain))

    recording.resources.sort(key=path)
    recording.invokes.sort(key=lambda i: json.dumps(i, sort_keys=True, default=str))
    for r in recording.resources:
        r.dependencies = sorted(r.dependencies)
        r.property_dependencies = {k: sorted(v) for k, v in sorted(r.property_dependencies.items())}
