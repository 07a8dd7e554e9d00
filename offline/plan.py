"""The offline plan's build: run the real `__main__.py` for a stack under the recording engine and write its
plan folder (`manifests/`, `plan.json`, `plan.md`, `plan.svg`). `plan.py` at the repository root is the command
line over it; the docs' figures (offline/report/docs_figures.py), the RAM policy generator, the benchmark and
teardown's summary build plans through this module, never through the command.

What a plan folder holds, and why secrets never reach it: plan.py's docstring and docs/offline-plan.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import json
import re
import shutil
import tempfile
from pathlib import Path

import yaml

from components.config import (
    PROJECT,
    SECRET_KEYS,
    SETTINGS_KEY,
    Problem,
    SettingsError,
    raw_settings,
    read_stack_config,
    stack_file,
)
from components.config.sharing import experiment_on_platform_problems
from components.config.task import task_root
from components.experiment import IdentityError, check_experiment_identity
from components.model import parse_settings, resolve_layout
from components.sweep import variants
from components.task_check import require_task
from components.wiring import ray_namespace
from components.workloads.training.verl_compose import refuse_uncomposable
from offline import base_ref, day2, review
from offline.engine import Recording, StackOutputs, run_program
from offline.report import plan_sections
from offline.report.latency import PlatformRun, single_of_pair
from offline.report.picture import mermaid_gantt, mermaid_pie, plan_svg

REPO = Path(__file__).resolve().parents[1]


# The file that marks a folder as plan.py's own: only such a folder (or an empty one) is ever replaced.
PLAN_MARKER = ".verl-ack-plan"
# What a plan folder written before the marker existed holds: such a folder (plan.json among them) is one too.
PLAN_ENTRIES = frozenset({"plan.json", "plan.md", "plan.svg", "dependencies.mmd", "manifests"})


class OutFolderRefused(Exception):
    """--out names a folder plan.py did not write: replacing it would delete someone's files."""


def check_out_folder(out: Path) -> None:
    """Refuse an output folder that holds anything but a previous plan (marker file) or nothing at all."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutFolderRefused(f"--out {out} is not a folder; give a new or empty folder, or a previous plan's")
    if not out.exists() or (out / PLAN_MARKER).is_file():
        return
    entries = {e.name for e in out.iterdir()}
    if not entries or ("plan.json" in entries and entries <= PLAN_ENTRIES):
        return
    raise OutFolderRefused(
        f"--out {out} is not empty and holds no previous plan (no {PLAN_MARKER} marker); the plan replaces its "
        "folder whole, so it writes only into a new or empty folder or one a previous plan.py run wrote: give "
        "another --out (default out/<stack>)")


# kubectl-style apply order among objects that do not depend on each other.
KIND_RANK = {k: i for i, k in enumerate([
    "Namespace", "CustomResourceDefinition", "PriorityClass", "StorageClass", "ServiceAccount", "ClusterRole",
    "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "PersistentVolume",
    "PersistentVolumeClaim", "NetworkPolicy", "IngressClass", "AlbConfig", "Service", "DaemonSet", "Deployment",
    "StatefulSet", "Job", "Ingress", "SandboxSet", "RayJob"])}


def stack_config(path: Path, secret_values: dict[str, str] | None = None) -> tuple[dict[str, str], list[str], dict]:
    """Config map the program sees offline: settings as JSON, every secret key as a placeholder (tests pass
    `secret_values` to prove real-looking secrets never reach the plan)."""
    raw = read_stack_config(path)
    settings = raw.get(SETTINGS_KEY)
    config: dict[str, str] = {}
    for key, value in raw.items():
        if key == SETTINGS_KEY or isinstance(value, dict) and "secure" in value:
            continue
        config[key] = value if isinstance(value, str) else _config_json(key, value)
    config[SETTINGS_KEY] = _config_json(SETTINGS_KEY, settings if settings is not None else {})
    secret_keys = []
    for key in SECRET_KEYS:
        full = f"{PROJECT}:{key}"
        config[full] = (secret_values or {}).get(key, f"offline-placeholder-{key}")
        secret_keys.append(full)
    return config, secret_keys, settings


def _config_json(key: str, value) -> str:
    """Pulumi config carries structured values as JSON; an unquoted YAML date becomes its ISO text (the settings
    model reads it that way too), anything JSON cannot hold is a problem of that key."""
    def default(v):
        if isinstance(v, (datetime.date, datetime.datetime)):
            return v.isoformat()
        raise TypeError(f"a YAML {type(v).__name__} value")

    try:
        return json.dumps(value, default=default)
    except (TypeError, ValueError) as err:
        raise SettingsError([Problem(field=key, message=f"cannot be passed to the program as Pulumi config ({err}); "
                                     "write plain YAML text, numbers, lists and mappings with text keys")]) from None


def _manifest(reg) -> dict | None:
    obj = {k: v for k, v in reg.inputs.items() if not k.startswith("__")}
    if "apiVersion" not in obj or "kind" not in obj:
        return None  # a Helm release or another non-object resource; listed in plan.json/plan.md
    ordered = {k: obj.pop(k) for k in ("apiVersion", "kind", "metadata") if k in obj}
    ordered.update(obj)
    return ordered


def apply_order(recording: Recording) -> list:
    """Kubernetes objects in dependency order, kind rank breaking ties (Kahn's algorithm)."""
    objs = [r for r in recording.resources if r.is_kubernetes]
    by_urn = {r.urn: r for r in objs}
    parents_of = {r.urn: r.parent for r in recording.resources}

    def k8s_deps(r) -> set[str]:
        # Dependencies on components count as dependencies on the objects inside them.
        deps = set(r.dependencies) | {u for us in r.property_dependencies.values() for u in us}
        out = set()
        for d in deps:
            if d in by_urn:
                out.add(d)
            else:
                out |= {o.urn for o in objs if _inside(o.urn, d, parents_of)}
        out.discard(r.urn)
        return out

    deps = {r.urn: k8s_deps(r) for r in objs}
    index = {r.urn: i for i, r in enumerate(objs)}
    waiting = {u: set(d) for u, d in deps.items()}
    heap = [(KIND_RANK.get(r.inputs.get("kind"), 50), index[r.urn], r.urn) for r in objs if not waiting[r.urn]]
    heapq.heapify(heap)
    done: list = []
    while heap:
        _, _, urn = heapq.heappop(heap)
        done.append(by_urn[urn])
        for other, ds in waiting.items():
            if urn in ds:
                ds.discard(urn)
                if not ds and other not in {d.urn for d in done} and all(other != h[2] for h in heap):
                    heapq.heappush(heap, (KIND_RANK.get(by_urn[other].inputs.get("kind"), 50), index[other], other))
    if len(done) != len(objs):
        cyclic = sorted(set(by_urn) - {d.urn for d in done})
        raise RuntimeError(f"dependency cycle among Kubernetes objects: {cyclic}")
    return done


def _inside(urn: str, ancestor: str, parents_of: dict[str, str]) -> bool:
    seen = urn
    while seen:
        seen = parents_of.get(seen, "")
        if seen == ancestor:
            return True
    return False


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-")


def _short_urn(urn: str) -> str:
    return urn.split("::")[-1] if urn else ""


def write_manifests(recording: Recording, out: Path) -> list[str]:
    mdir = out / "manifests"
    mdir.mkdir(parents=True)
    files = []
    for i, reg in enumerate(apply_order(recording), start=1):
        obj = _manifest(reg)
        if obj is None:
            continue
        meta = obj.get("metadata") or {}
        name = "-".join(p for p in (str(i).zfill(3), obj["kind"], meta.get("namespace", ""), meta.get("name", reg.name)) if p)
        path = mdir / f"{_slug(name)}.yaml"
        path.write_text(f"# {reg.type} {reg.name}\n" + yaml.safe_dump(obj, sort_keys=False, width=120))
        files.append(str(path.relative_to(out)))
    return files


def mermaid(resources: list[dict]) -> str:
    """The whole dependency graph (plan.json's resources) as a mermaid flowchart: `dependencies.mmd`, for tools;
    plan.md shows the critical path and the cost instead (offline/report/picture.py)."""
    ids = {r["urn"]: f"r{i}" for i, r in enumerate(resources)}
    lines = ["flowchart LR"]
    for r in resources:
        shape = ("[", "]") if r["custom"] else ("([", "])")
        lines.append(f'  {ids[r["urn"]]}{shape[0]}"{r["type"].split(":")[-1]} {r["name"]}"{shape[1]}')
    for r in resources:
        for d in sorted(set(r["dependencies"])):
            if d in ids:
                lines.append(f"  {ids[d]} --> {ids[r['urn']]}")
        if r["parent"] in ids:
            lines.append(f"  {ids[r['parent']]} -.- {ids[r['urn']]}")
    return "\n".join(lines) + "\n"


def shell_lines(command: str) -> str:
    """The command with one option or override per line (values hold no spaces: the training job validates
    each word); each program (the entrypoint, and after each `--` the command it runs: the preflight, verl) starts a
    line with its module."""
    lines: list[str] = []
    for i, part in enumerate(command.split(" -- ")):
        words = part.split()
        first = next((j for j, w in enumerate(words) if w.startswith("--") or "=" in w), len(words))
        lines += [*(["--"] if i else []), " ".join(words[:first]), *words[first:]]
    return " \\\n    ".join(lines)


def render_markdown(plan: dict, sections) -> str:
    """plan.md from plan.json's data (and each section's markdown, itself built from that section's data), so
    every figure plan.md states is one plan.json holds (tests/test_plan.py checks every number)."""
    counts = plan["counts"]
    out = [f"# verl-ack offline plan: stack `{plan['stack']}`", "",
           f"{counts['resources']} resources, {counts['manifests']} Kubernetes manifests. Generated offline by "
           "`plan.py` from the real program under a recording mock engine; secret values show as `[secret]`. "
           "Pictures: [`plan.svg`](plan.svg) (the critical path and the cost).", ""]
    entry = plan["training_entrypoint"]
    if entry:
        out += ["## verl command line", "", "```sh", shell_lines(str(entry)), "```", ""]
    for sec in sections:
        out += [f"## {sec.title}", "", sec.markdown, ""]
    if plan["warnings"]:
        out += ["## Warnings", ""] + [f"- warning: {msg}" for msg in plan["warnings"]] + [""]
    out += ["## Timeline and cost", "", "The critical path (time section) and the cost breakdown (cost section) as "
            "pictures; the same in [`plan.svg`](plan.svg). The full dependency graph of all "
            f"{counts['resources']} resources is in `dependencies.mmd` (mermaid), each resource's dependencies in "
            "`plan.json`.", ""]
    for chart in (mermaid_gantt(plan["sections"]["latency"], plan["sections"]["cost"]), mermaid_pie(plan["sections"]["cost"])):
        if chart:
            out += ["```mermaid", chart, "```", ""]
    out += ["## Resources", "", "| type | name | parent | provider |", "|---|---|---|---|"]
    for r in plan["resources"]:
        prov = r["provider"].split("::")[-1] if r["provider"] else ""
        out.append(f"| `{r['type']}` | {r['name']} | {_short_urn(r['parent'])} | {prov} |")
    out += ["", "## Stack outputs", "", "```json", json.dumps(plan["outputs"], indent=2, sort_keys=True), "```", ""]
    out += ["## Manifests (apply order)", ""] + [f"- `{m}`" for m in plan["manifests"]] + [""]
    return "\n".join(out)


def render_platform(settings, secret_values: dict[str, str] | None = None) -> PlatformRun:
    """The offline run of an experiment's platform stack, whose outputs its StackReference reads: the stack file
    named by the last part of `platform_stack` (stacks/Pulumi.<stack>.yaml), run in-process first."""
    name = settings.platform_stack.rsplit("/", 1)[-1]
    path = stack_file(name)

    def problem(message: str) -> SettingsError:
        return SettingsError([Problem(field="platform_stack", message=message)])

    if not path.exists():
        raise problem(f"{settings.platform_stack}: no {path.relative_to(REPO)} to render the platform offline; add "
                      "the platform's stack file or fix the name")
    try:
        raw = raw_settings(path)
        platform_settings = parse_settings(raw)
    except SettingsError as err:
        # The platform's own file is wrong, not this one: name it, so the fix lands in the right file.
        raise SettingsError([Problem(field=f"platform_stack {settings.platform_stack} ({path.relative_to(REPO)}): "
                                     f"{p.field}", message=p.message) for p in err.problems]) from None
    if platform_settings.kind != "platform":
        raise problem(f"{settings.platform_stack} is kind={platform_settings.kind}; an experiment runs on a "
                      "kind=platform stack")
    if platform_settings.region != settings.region:
        raise problem(f"the platform is in {platform_settings.region} but this experiment says region "
                      f"{settings.region}; the GPU pool joins the platform's cluster, so use its region")
    if platform_settings.storage.bucket_name != settings.storage.bucket_name:
        raise problem(f"storage.bucket_name {settings.storage.bucket_name!r} is not the platform's bucket "
                      f"{platform_settings.storage.bucket_name!r}; the program reads the bucket from the platform, and "
                      "teardown.py keeps checkpoints from the bucket this file names: give the platform's")
    if platform_settings.job.namespace == settings.job.namespace:
        raise problem(f"job.namespace {settings.job.namespace!r} is the platform's own namespace (MLflow); give the "
                      "experiment its own")
    if platform_settings.gpu_pool.owner != settings.gpu_pool.owner:
        raise problem(f"gpu_pool.owner is {settings.gpu_pool.owner!r} but the platform's is "
                      f"{platform_settings.gpu_pool.owner!r}: the stacks of a pair must agree on who owns the GPU pool; "
                      f"set gpu_pool.owner: {platform_settings.gpu_pool.owner} here")
    if settings.gpu_pool.owner == "platform" and platform_settings.gpu_pool != settings.gpu_pool:
        raise problem("gpu_pool differs from the platform's, which owns the pool (gpu_pool.owner: platform): the layout "
                      "and the verl command are sized from this file, the nodes are the platform's; copy the "
                      "platform's gpu_pool section")
    if settings.queue.enabled and platform_settings.queue.team_of(ray_namespace(settings)) is None:
        ns = ray_namespace(settings)
        raise problem(f"the RayJob namespace {ns} (job.namespace{'' if ns == settings.job.namespace else ', -ray with RDMA'}) "
                      f"is in none of the platform's queue.teams ({', '.join(sorted(platform_settings.queue.teams)) or 'none'}), "
                      f"so its queue would never dequeue the job: add `{ns}: {{gpus: N}}` under queue.teams (or to a team's "
                      f"namespaces) in "
                      f"{path.relative_to(REPO)}")
    if pair := experiment_on_platform_problems(platform_settings, settings, ray_namespace(settings)):
        raise SettingsError([Problem(field=f, message=f"{m} (platform {settings.platform_stack})") for f, m in pair])
    config, secret_keys, _ = stack_config(path, secret_values)
    recording = run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=name)
    return PlatformRun(name, platform_settings, recording, raw)


def record_stack(path: Path, stack: str, own_outputs: StackOutputs | None = None, prior: dict | None = None) -> Recording:
    """One offline run of a stack file (an experiment's platform rendered first), as the change report needs it."""
    settings = parse_settings(raw_settings(path))
    config, secret_keys, _ = stack_config(path)
    platform = render_platform(settings) if settings.kind == "experiment" else None
    references = {settings.platform_stack: StackOutputs.of(platform.recording)} if platform else {}
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                       stack_references=references, own_outputs=own_outputs, prior=prior)  # type: ignore[arg-type]


def change_report(base_path: Path, path: Path, stack: str) -> list:
    """The changes `path` makes to the stack `base_path` built (day2.ChangeRefused when the program refuses)."""
    base = record_stack(base_path, stack)
    return day2.change_report(base, lambda own, prior: record_stack(path, stack, own, prior))


@dataclasses.dataclass
class ChangeReview:
    """What build_plan needs to write a change report: the changes and the two runs and plans they come from."""

    changes: list
    base_name: str
    base_settings: dict
    base: Recording  # the base file's run (the state's source)
    new: Recording  # the new file's run over that state
    base_plan: dict  # the base file's own offline plan (its figures are the report's "old")


def change_review(base_path: Path, path: Path, stack: str) -> ChangeReview:
    """The change report of `path` against `base_path`: the changes (day2.ChangeRefused when the program refuses)
    with the recordings and the base's plan, so the report can say old -> new for settings, fields and figures."""
    base = record_stack(base_path, stack)
    state, new = day2.second_run(base, lambda own, prior: record_stack(path, stack, own, prior))
    found = day2.changes(base, state, new)
    with tempfile.TemporaryDirectory(prefix=f"plan-{stack}-base-") as tmp:
        base_plan = build_plan(base_path, stack, Path(tmp) / "base")
    return ChangeReview(found, f"`{base_path}`", raw_settings(base_path), base, new, base_plan)


def change_review_at_ref(ref: str, path: Path, stack: str, base_file: Path | None = None) -> ChangeReview:
    """The change report of `path` (with today's program) against the stack as the program at git `ref` built it
    (offline/base_ref.py): code changes show as well as stack-file ones. The base stack file is the tree's own
    copy of `path` at `ref` (none there: every resource a create), or `base_file` when given."""
    try:
        rel = path.resolve().relative_to(REPO)
    except ValueError:
        rel = None
    if rel is None and base_file is None:
        raise base_ref.BaseRefError(f"{path} is outside the repository, so {ref} has no copy of it: give the base "
                                    "stack file with --base-config-file too")
    base = base_ref.render_at(ref, stack, rel, base_file)
    name = f"`{ref}` ({base.sha[:12]}{', ' + base.stack_file if base.stack_file else ', no stack file there'})"
    if base.recording is None:  # a new stack: nothing in the state, every resource created
        new = record_stack(path, stack)
        return ChangeReview(day2.changes(None, {}, new), name, {}, Recording(), new, base.plan)
    state, new = day2.second_run(base.recording, lambda own, prior: record_stack(path, stack, own, prior))
    return ChangeReview(day2.changes(base.recording, state, new), name, base.settings, base.recording, new,
                        base.plan)


def replace_out_folder(tmp: Path, out: Path) -> None:
    """Put the finished plan folder `tmp` in place of `out`, checked again right before the replace: the folder may
    have changed while the program ran."""
    check_out_folder(out)
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tmp), str(out))


def build_plan(path: Path, stack: str, out: Path, secret_values: dict[str, str] | None = None,
               changes: ChangeReview | None = None) -> dict:
    with task_root(Path(path).resolve().parent):  # a task's files are relative to its stack file's folder
        return _build_plan(path, stack, out, secret_values, changes)


def _build_plan(path: Path, stack: str, out: Path, secret_values: dict[str, str] | None = None,
                changes: ChangeReview | None = None) -> dict:
    # SettingsError -> exit 2 before anything runs: the settings first (every problem with its field), then the
    # rest of the config as the program will see it.
    raw = raw_settings(path)
    settings = parse_settings(raw)
    require_task(settings)  # the task's CPU proof (components/task_check.py): exit 2 naming task.* on a problem
    if settings.kind != "platform":  # verl composes the job's config, overrides included, before the program runs
        refuse_uncomposable(settings, resolve_layout(settings), [(v.settings, v.layout) for v in variants(settings)])
    config, secret_keys, _ = stack_config(path, secret_values)
    platform = render_platform(settings, secret_values) if settings.kind == "experiment" else None
    try:  # a copied experiment stack file: refused before anything runs, as the preview refuses it
        check_experiment_identity(settings, stack)
    except IdentityError as err:
        raise SettingsError([Problem(field="name", message=str(err))]) from None
    references = {settings.platform_stack: StackOutputs.of(platform.recording)} if platform else {}
    recording = run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                            stack_references=references)  # type: ignore[arg-type]
    if platform:
        # The "new platform + experiment" figure: the pair as one program (what a single stack of them builds).
        merged = single_of_pair(platform.raw, raw or {})
        fresh_settings = parse_settings(merged)
        fresh = run_program(REPO / "__main__.py", {**config, SETTINGS_KEY: _config_json(SETTINGS_KEY, merged)},
                            secret_keys, project=PROJECT, stack=f"{stack}-as-single")
        platform = dataclasses.replace(platform, fresh=(fresh_settings, fresh))
    recording.platform = platform
    recording.stack_file = path
    sections = plan_sections(settings, recording)
    check_out_folder(out)
    tmp = Path(tempfile.mkdtemp(prefix=f"plan-{stack}-"))
    try:
        (tmp / PLAN_MARKER).write_text("Written by plan.py: the next plan of this folder replaces it whole.\n")
        manifests = write_manifests(recording, tmp)
        plan = {
            "stack": stack,
            "project": PROJECT,
            "resources": [{
                "urn": r.urn, "type": r.type, "name": r.name, "custom": r.custom, "parent": r.parent,
                "provider": r.provider, "dependencies": r.dependencies,
                "property_dependencies": r.property_dependencies, "inputs": r.inputs, "options": r.options,
            } for r in recording.resources],
            "sections": {s.key: s.data for s in sections},
            "training_entrypoint": recording.outputs.get("training_entrypoint"),
            "outputs": recording.outputs,
            "invokes": recording.invokes,
            "warnings": [msg for _, msg in recording.logs],
            "manifests": manifests,
            "counts": {"resources": len(recording.resources), "manifests": len(manifests)},
        }
        if changes is not None:
            plan["changes"] = [c.as_json() for c in changes.changes]
            plan["review"] = review.review(changes.base_settings, raw, changes.changes, changes.base, changes.new,
                                           changes.base_plan, json.loads(json.dumps(plan, default=str)))
        (tmp / "plan.json").write_text(json.dumps(plan, indent=2, sort_keys=False, default=str) + "\n")
        plan = json.loads((tmp / "plan.json").read_text())  # plan.md, plan.svg: from exactly what plan.json holds
        md = render_markdown(plan, sections)
        if changes is not None:  # first in plan.md, after the one-paragraph header
            title, intro, rest = md.split("\n\n", 2)
            md = "\n\n".join([title, intro, review.markdown(plan["review"], changes.base_name).rstrip("\n"), rest])
        (tmp / "plan.md").write_text(md)
        (tmp / "plan.svg").write_text(plan_svg(stack, plan["sections"]["latency"], plan["sections"]["cost"],
                                                ((plan["sections"].get("sharing") or {}).get("sweep") or {}).get("queue")))
        (tmp / "dependencies.mmd").write_text(mermaid(plan["resources"]))
        needles = ["offline-placeholder-", *(v for v in (secret_values or {}).values() if v)]
        for f in tmp.rglob("*"):
            if f.is_file() and any(n in f.read_text() for n in needles):
                raise RuntimeError(f"a secret placeholder escaped its secret wrapper into {f.name}; "
                                   "some code unwrapped a secret Output")
        replace_out_folder(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return plan
