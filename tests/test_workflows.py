"""GitHub Actions workflows (.github/workflows/): they parse, pass the structural rules GitHub enforces, pin
every action to a release commit recorded in docs/workflows.md, grant least privilege, never cancel a cloud
change mid-flight, keep untrusted PR code away from credentials (cloud access only through OIDC roles, only in
protected environments, never for a fork), and the stack-selection helper they call (ci_stacks.py) decides
correctly."""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))
CLOUD_CHANGING = ("deploy.yml", "teardown.yml")
OIDC_ACTION = "aliyun/configure-aliyun-credentials-action"
SAME_REPO = "github.event.pull_request.head.repo.full_name == github.repository"
# A dispatched teardown (anyone with write access can dispatch) runs in the reviewed `teardown-manual`
# environment; the hourly schedule in the unreviewed `teardown`.
TEARDOWN_ENVIRONMENT = "${{ github.event_name == 'workflow_dispatch' && 'teardown-manual' || 'teardown' }}"
# Jobs that touch the cloud: (workflow, job) -> (environment, RAM role variable). The preview role is read-only;
# the deploy role's trust policy names only the deploy and teardown environments (docs/workflows.md).
CLOUD_JOBS = {
    ("pr.yml", "preview"): ("preview", "ALIYUN_PREVIEW_ROLE_ARN"),
    ("deploy.yml", "up"): ("deploy", "ALIYUN_DEPLOY_ROLE_ARN"),
    ("teardown.yml", "teardown"): (TEARDOWN_ENVIRONMENT, "ALIYUN_DEPLOY_ROLE_ARN"),
}
# Cloud, state and registry-push credentials: each only behind an environment.
CREDENTIAL_SECRET = re.compile(r"secrets\.(PULUMI_|ALICLOUD_|ALIBABA|OSS_|ACR_)")

_spec = importlib.util.spec_from_file_location("ci_stacks", WORKFLOWS / "ci_stacks.py")
ci_stacks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci_stacks)

# Inputs each pinned action declares in its action.yml at the pinned release (read from the release commit).
# A `with:` key outside these is silently ignored by the runner, so a typo would disable a setting unnoticed.
ACTION_INPUTS = {
    "actions/checkout": {
        "allow-unsafe-pr-checkout", "clean", "fetch-depth", "fetch-tags", "filter", "github-server-url", "lfs", "path",
        "persist-credentials", "ref", "repository", "set-safe-directory", "show-progress", "sparse-checkout",
        "sparse-checkout-cone-mode", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user", "submodules", "token"},
    "actions/setup-python": {
        "allow-prereleases", "architecture", "cache", "cache-dependency-path", "check-latest", "freethreaded",
        "pip-version", "python-version", "python-version-file", "token", "update-environment"},
    "actions/upload-artifact": {
        "archive", "compression-level", "if-no-files-found", "include-hidden-files", "name", "overwrite", "path",
        "retention-days"},
    "aliyun/configure-aliyun-credentials-action": {
        "audience", "oidc-provider-arn", "role-chaining", "role-session-expiration", "role-session-name",
        "role-to-assume"},
    "actions/download-artifact": {
        "artifact-ids", "digest-mismatch", "github-token", "merge-multiple", "name", "path", "pattern", "repository",
        "run-id", "skip-decompress"},
    "pulumi/actions": {
        "always-include-summary", "cloud-url", "color", "command", "comment-on-pr", "comment-on-pr-number",
        "comment-on-summary", "config-map", "continue-on-error", "debug", "diff", "edit-pr-comment", "exclude",
        "exclude-dependents", "exclude-protected", "expect-no-changes", "github-token", "log-flow", "log-verbosity",
        "message", "parallel", "plan", "policyPackConfigs", "policyPacks", "pulumi-version", "pulumi-version-file",
        "refresh", "remove", "replace", "secrets-provider", "stack-name", "suppress-outputs", "suppress-progress",
        "target", "target-dependents", "upsert", "work-dir"},
    "docker/setup-buildx-action": {
        "append", "buildkitd-config", "buildkitd-config-inline", "buildkitd-flags", "cache-binary", "cleanup", "driver",
        "driver-opts", "endpoint", "keep-state", "name", "platforms", "use", "version"},
    "docker/login-action": {"ecr", "logout", "password", "registry", "registry-auth", "scope", "username"},
    "docker/build-push-action": {
        "add-hosts", "allow", "annotations", "attests", "build-args", "build-contexts", "builder", "cache-from",
        "cache-to", "call", "cgroup-parent", "context", "file", "github-token", "labels", "load", "network", "no-cache",
        "no-cache-filters", "outputs", "platforms", "provenance", "pull", "push", "sbom", "secret-envs", "secret-files",
        "secrets", "shm-size", "ssh", "tags", "target", "ulimit"},
}
PERMISSION_SCOPES = {
    "actions", "attestations", "checks", "contents", "deployments", "discussions", "id-token", "issues", "models",
    "packages", "pages", "pull-requests", "repository-projects", "security-events", "statuses",
}
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+?)(?:\s+#\s*(?P<comment>.*))?$", re.MULTILINE)
PINNED = re.compile(r"^(?P<action>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:/[^@]+)?@(?P<sha>[0-9a-f]{40})$")
VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as boolean True; GitHub reads it as "on".
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


DOCS = {p.name: load(p) for p in FILES}


def jobs(name: str) -> dict:
    return DOCS[name]["jobs"]


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def all_steps():
    for name, doc in DOCS.items():
        for job_id, job in doc["jobs"].items():
            for i, step in enumerate(steps(job)):
                yield name, job_id, i, step


def docs_pins() -> dict[str, tuple[str, str]]:
    """action -> (version, sha) from the table in docs/workflows.md."""
    rows = re.findall(r"^\|\s*`?([a-z0-9-]+/[a-z0-9-]+)`?\s*\|\s*`?(v\d+\.\d+\.\d+)`?\s*\|\s*`?([0-9a-f]{40})`?\s*\|",
                      (REPO / "docs" / "workflows.md").read_text(), re.MULTILINE)
    return {a: (v, s) for a, v, s in rows}


# ============================================================================================== structure
def test_the_five_workflows_exist():
    assert set(DOCS) == {"pr.yml", "pr-comment.yml", "deploy.yml", "teardown.yml", "image.yml"}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_workflow_has_a_name_triggers_and_jobs(name):
    doc = DOCS[name]
    assert isinstance(doc.get("name"), str) and doc["name"]
    assert doc.get("on"), f"{name}: no `on:` triggers"
    assert isinstance(doc.get("jobs"), dict) and doc["jobs"], f"{name}: no jobs"
    for job_id in doc["jobs"]:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", job_id), f"{name}: invalid job id {job_id!r}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_job_has_a_runner_steps_and_a_timeout(name):
    for job_id, job in jobs(name).items():
        if "uses" in job:  # a reusable workflow call has neither runs-on nor steps
            continue
        assert job.get("runs-on"), f"{name}:{job_id} has no runs-on"
        assert steps(job), f"{name}:{job_id} has no steps"
        assert isinstance(job.get("timeout-minutes"), int), f"{name}:{job_id}: a hung job bills for 6 hours"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_step_either_runs_a_script_or_uses_an_action(name):
    for job_id, job in jobs(name).items():
        ids = [s["id"] for s in steps(job) if "id" in s]
        assert len(ids) == len(set(ids)), f"{name}:{job_id}: duplicate step ids"
        for i, step in enumerate(steps(job)):
            assert ("uses" in step) != ("run" in step), f"{name}:{job_id} step {i} needs exactly one of uses/run"
            if "run" in step:
                assert isinstance(step["run"], str) and step["run"].strip()
            assert "with" not in step or "uses" in step, f"{name}:{job_id} step {i}: `with` without `uses`"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_needs_and_output_references_point_at_things_that_exist(name):
    doc = DOCS[name]
    for job_id, job in doc["jobs"].items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert set(needs) <= set(doc["jobs"]) - {job_id}, f"{name}:{job_id} needs an unknown job"
        text = yaml.safe_dump(job)
        for dep, output in re.findall(r"needs\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)", text):
            assert dep in needs, f"{name}:{job_id} reads needs.{dep} without needing it"
            assert output in (doc["jobs"][dep].get("outputs") or {}), f"{name}: {dep} has no output {output}"
        step_ids = {s.get("id") for s in steps(job)}
        for step_id in re.findall(r"steps\.([A-Za-z0-9_-]+)\.outputs", text):
            assert step_id in step_ids, f"{name}:{job_id} reads outputs of an unknown step {step_id}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_expressions_are_closed(name):
    text = (WORKFLOWS / name).read_text()
    assert text.count("${{") == text.count("}}"), f"{name}: unbalanced ${{{{ }}}}"


# ============================================================================================== pinning
def uses_lines():
    for path in FILES:
        for match in USES_LINE.finditer(path.read_text()):
            ref = match["ref"].strip("'\"")
            if ref.startswith(("./", "docker://")):
                continue
            yield path.name, ref, (match["comment"] or "").strip()


def test_every_external_action_is_pinned_to_a_full_commit_sha_with_its_version():
    lines = list(uses_lines())
    assert lines
    for name, ref, comment in lines:
        assert PINNED.match(ref), f"{name}: {ref} is not pinned to a 40-hex commit"
        assert VERSION.match(comment), f"{name}: {ref} needs a `# vX.Y.Z` comment, got {comment!r}"


def test_an_action_is_pinned_to_the_same_commit_and_version_everywhere():
    seen: dict[str, tuple[str, str]] = {}
    for name, ref, comment in uses_lines():
        m = PINNED.match(ref)
        pin = (m["sha"], comment)
        assert seen.setdefault(m["action"], pin) == pin, f"{name}: {m['action']} pinned differently elsewhere"


def test_pins_are_the_release_commits_listed_in_docs_workflows_md():
    documented = docs_pins()
    used = {}
    for _, ref, comment in uses_lines():
        m = PINNED.match(ref)
        used[m["action"]] = (comment, m["sha"])
    assert used == {a: documented[a] for a in used}, "docs/workflows.md and the workflows disagree on a pin"
    assert set(documented) == set(used), "docs/workflows.md lists an action no workflow uses (or misses one)"


def test_action_inputs_are_ones_the_pinned_release_declares():
    for name, job_id, i, step in all_steps():
        if "uses" not in step or step["uses"].startswith("./"):
            continue
        action = PINNED.match(step["uses"])["action"]
        assert action in ACTION_INPUTS, f"{name}: no input list for {action}; add it from its action.yml"
        unknown = set(step.get("with") or {}) - ACTION_INPUTS[action]
        assert not unknown, f"{name}:{job_id} step {i}: {action} has no input(s) {sorted(unknown)}"


# ============================================================================================== permissions
@pytest.mark.parametrize("name", sorted(DOCS))
def test_permissions_default_to_nothing_and_every_job_declares_its_own(name):
    doc = DOCS[name]
    assert doc.get("permissions") == {}, f"{name}: top-level permissions must be {{}} (deny by default)"
    for job_id, job in doc["jobs"].items():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{name}:{job_id} must declare its permissions"
        assert set(perms) <= PERMISSION_SCOPES, f"{name}:{job_id}: unknown permission scope"
        assert set(perms.values()) <= {"read", "write", "none"}


def test_only_pr_comments_and_oidc_tokens_are_written():
    writers = {(name, job_id, scope) for name, doc in DOCS.items() for job_id, job in doc["jobs"].items()
               for scope, level in job["permissions"].items() if level == "write"}
    comments = {("pr.yml", "preview", "pull-requests"), ("pr.yml", "cost", "pull-requests"),
                ("pr.yml", "change-report", "pull-requests"), ("pr-comment.yml", "relay", "pull-requests")}
    oidc = {(name, job_id, "id-token") for name, job_id in CLOUD_JOBS}
    assert writers == comments | oidc


def test_an_oidc_token_is_only_minted_in_a_job_behind_an_environment():
    for name, doc in DOCS.items():
        for job_id, job in doc["jobs"].items():
            if job["permissions"].get("id-token") == "write":
                assert (name, job_id) in CLOUD_JOBS and job.get("environment"), f"{name}:{job_id}"


def test_no_run_script_interpolates_untrusted_event_data():
    # ${{ }} in a script is pasted in before the shell parses it: a branch name or dispatch input could inject
    # commands. Such values travel through env: instead.
    risky = re.compile(r"\$\{\{\s*(github\.event\.|github\.head_ref|inputs\.|matrix\.)")
    for name, job_id, i, step in all_steps():
        assert not risky.search(step.get("run", "")), f"{name}:{job_id} step {i} interpolates into its script"


def test_pull_requests_use_the_unprivileged_trigger():
    assert set(DOCS["pr.yml"]["on"]) == {"pull_request"}
    for name, doc in DOCS.items():
        assert "pull_request_target" not in doc["on"]
        # workflow_run runs in the base repository's context: only the comment relay may use it, and it runs no code
        assert ("workflow_run" in doc["on"]) == (name == "pr-comment.yml")


def test_the_fork_comment_relay_runs_no_pr_code_and_holds_no_credentials():
    doc = DOCS["pr-comment.yml"]
    assert doc["on"] == {"workflow_run": {"workflows": ["pr"], "types": ["completed"]}}
    (job,) = doc["jobs"].values()
    assert job["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "write"}
    text = yaml.safe_dump(doc)
    assert "actions/checkout" not in text and "secrets." not in text and not job.get("environment")
    assert "head_repository.full_name != github.repository" in job["if"]  # same-repo PRs comment themselves
    script = "\n".join(step.get("run", "") for step in steps(job))
    # the artifact is data: its PR number and stack name are checked, and the PR must be at the run's commit
    assert '[[ "$pr" =~ ^[0-9]+$ ]]' in script and '[[ "$stack" =~ ^[A-Za-z0-9_.-]+$ ]]' in script
    assert '[ "$head" = "$RUN_HEAD_SHA" ]' in script
    assert "-F body=@body.md" in script
    assert not any(step.get("uses", "").startswith("actions/setup-python") for step in steps(job))


def test_a_fork_pr_hands_its_change_report_to_the_relay_as_an_artifact():
    job = jobs("pr.yml")["change-report"]
    fork = [s for s in steps(job) if s.get("if") == "github.event.pull_request.head.repo.full_name != github.repository"]
    upload = next(s for s in fork if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "change-report-${{ matrix.stack }}"
    relay = DOCS["pr-comment.yml"]["jobs"]["relay"]
    download = next(s for s in steps(relay) if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "change-report-*"
    assert {"relay/pr", "relay/head", "relay/stack", "relay/comment.md"} <= set(re.findall(r"relay/[a-z.]+", fork[0]["run"]))


# ============================================================================================== credentials
def test_no_workflow_stores_a_long_lived_cloud_key():
    for path in FILES:
        text = path.read_text()
        assert not re.search(r"secrets\.(ALICLOUD|ALIBABA|OSS)_", text), f"{path.name}: a stored cloud AccessKey"
        assert "role-chaining" not in text  # chaining starts from stored or instance credentials


@pytest.mark.parametrize("workflow, job_id", sorted(CLOUD_JOBS))
def test_cloud_jobs_log_in_through_oidc_as_the_role_of_their_protected_environment(workflow, job_id):
    environment, role_var = CLOUD_JOBS[(workflow, job_id)]
    job = jobs(workflow)[job_id]
    assert job["environment"] == environment
    assert job["permissions"] == {"contents": "read", "id-token": "write",
                                  **({"pull-requests": "write"} if workflow == "pr.yml" else {})}
    logins = [i for i, s in enumerate(steps(job)) if s.get("uses", "").startswith(OIDC_ACTION + "@")]
    assert len(logins) == 1, f"{workflow}:{job_id}: one OIDC login"
    login = steps(job)[logins[0]]
    assert login["with"]["role-to-assume"] == f"${{{{ vars.{role_var} }}}}"
    assert login["with"]["oidc-provider-arn"] == "${{ vars.ALIYUN_OIDC_PROVIDER_ARN }}"
    # STS credentials are not refreshed mid-run: the session must outlive the job.
    assert login["with"]["role-session-expiration"] >= job["timeout-minutes"] * 60
    # Installs run before the login, so no package's install script sees the credentials; the cloud work after it.
    def installs(step):
        return any(word in step.get("run", "") for word in ("make setup", "make runtime", "pip install"))

    def cloud_work(step):
        return bool(step.get("with", {}).get("command")) or "teardown.py" in step.get("run", "")

    before, after = steps(job)[:logins[0]], steps(job)[logins[0] + 1:]
    assert any(map(installs, before)) and not any(map(installs, after))
    assert any(map(cloud_work, after)) and not any(map(cloud_work, before))


def test_only_the_preview_role_is_used_by_pull_requests_and_never_the_deploy_role():
    assert "ALIYUN_DEPLOY_ROLE_ARN" not in (WORKFLOWS / "pr.yml").read_text()
    for name in CLOUD_CHANGING:
        assert "ALIYUN_PREVIEW_ROLE_ARN" not in (WORKFLOWS / name).read_text()


@pytest.mark.parametrize("name", sorted(DOCS))
def test_state_and_cloud_credentials_are_read_only_by_jobs_behind_an_environment(name):
    # A same-repository PR can edit a workflow, so repository secrets reach any PR author with push access;
    # environment secrets only reach jobs the environment's branch policy and reviewers let through.
    for job_id, job in jobs(name).items():
        if CREDENTIAL_SECRET.search(yaml.safe_dump(job)):
            assert job.get("environment"), f"{name}:{job_id} reads a credential outside an environment"


def test_fork_pull_requests_get_the_offline_plan_only():
    pr = jobs("pr.yml")
    for job_id, job in pr.items():
        privileged = (job.get("environment") or job["permissions"].get("id-token")
                      or "secrets." in yaml.safe_dump(job) or "vars.ALIYUN" in yaml.safe_dump(job))
        if privileged:
            assert SAME_REPO in job.get("if", ""), f"pr.yml:{job_id} must skip fork PRs"
    offline = {job_id for job_id, job in pr.items() if SAME_REPO not in job.get("if", "")}
    assert offline == {"test", "plan", "changes", "cost", "change-report"}
    assert not any("secrets." in yaml.safe_dump(pr[j]) for j in offline)


def test_the_secrets_passphrase_never_reaches_a_fork_or_a_job_outside_an_environment():
    for name, doc in DOCS.items():
        for job_id, job in doc["jobs"].items():
            if "PULUMI_CONFIG_PASSPHRASE" in yaml.safe_dump(job):
                assert job.get("environment"), f"{name}:{job_id}"
                if name == "pr.yml":
                    assert SAME_REPO in job["if"]


# ============================================================================================== cloud changes
@pytest.mark.parametrize("name", sorted(DOCS))
def test_nothing_that_changes_cloud_resources_can_be_cancelled_mid_flight(name):
    doc = DOCS[name]
    groups = [doc.get("concurrency")] + [job.get("concurrency") for job in doc["jobs"].values()]
    for group in groups:
        if isinstance(group, dict) and group.get("cancel-in-progress") is True:
            assert name not in CLOUD_CHANGING and name != "image.yml", f"{name} cancels in progress"


@pytest.mark.parametrize("name, job_id", [("deploy.yml", "up"), ("teardown.yml", "teardown")])
def test_stack_changing_jobs_share_one_per_stack_group_and_run_behind_an_environment(name, job_id):
    job = jobs(name)[job_id]
    assert job["concurrency"] == {"group": "pulumi-stack-${{ matrix.stack }}", "cancel-in-progress": False}
    assert job["environment"] == {"deploy.yml": "deploy", "teardown.yml": TEARDOWN_ENVIRONMENT}[name]
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.select.outputs.stacks) }}"
    assert job["strategy"]["fail-fast"] is False
    comment = (WORKFLOWS / name).read_text()
    assert "pending operations" in comment, f"{name}: say why cancel-in-progress is false"


def test_the_preview_skips_with_a_summary_when_its_environment_is_not_configured():
    job = jobs("pr.yml")["preview"]
    check = steps(job)[0]
    assert check.get("id") == "creds"
    assert "GITHUB_STEP_SUMMARY" in check["run"] and "skipped" in check["run"]
    for step in steps(job)[1:]:
        assert step.get("if") == "steps.creds.outputs.available == 'true'", f"{step.get('name')} runs unconfigured"
    preview = next(s for s in steps(job) if "pulumi/actions" in s.get("uses", ""))
    assert preview["with"]["command"] == "preview"
    assert preview["with"]["comment-on-pr"] is True
    assert preview["with"]["policyPacks"] == "policy"


def test_deploy_runs_pulumi_up_with_the_policy_pack_on_pushes_to_main():
    assert DOCS["deploy.yml"]["on"] == {"push": {"branches": ["main"]}}
    up = next(s for s in steps(jobs("deploy.yml")["up"]) if (s.get("with") or {}).get("command"))
    assert "pulumi/actions" in up["uses"]
    assert up["with"]["command"] == "up" and up["with"]["policyPacks"] == "policy"


def test_teardown_is_dispatchable_for_a_stack_and_scheduled():
    on = DOCS["teardown.yml"]["on"]
    assert on["workflow_dispatch"]["inputs"]["stack"]["required"] is True
    for entry in on["schedule"]:
        assert len(entry["cron"].split()) == 5
    script = next(s["run"] for s in steps(jobs("teardown.yml")["teardown"]) if "teardown.py" in s.get("run", ""))
    assert 'teardown.py --stack "$STACK" --destroy' in script


def test_the_image_is_built_from_image_and_pushed_with_content_hash_tags_and_a_registry_cache():
    doc = DOCS["image.yml"]
    assert "image/**" in doc["on"]["push"]["paths"]
    build = next(s for s in steps(jobs("image.yml")["build"]) if "build-push-action" in s.get("uses", ""))
    assert build["with"]["context"] == "image" and build["with"]["push"] is True
    assert build["with"]["tags"] == "${{ steps.meta.outputs.tags }}"
    assert build["with"]["cache-from"].startswith("type=registry")
    assert build["with"]["cache-to"].startswith("type=registry") and "mode=max" in build["with"]["cache-to"]


def test_the_cli_version_matches_the_pinned_pulumi_sdk():
    sdk = re.search(r"^pulumi==(\S+)$", (REPO / "requirements.txt").read_text(), re.MULTILINE)[1]
    for name in ("pr.yml", "deploy.yml", "teardown.yml"):
        assert DOCS[name]["env"]["PULUMI_VERSION"] == sdk


def test_helper_commands_the_workflows_call_exist():
    text = "\n".join(p.read_text() for p in FILES)
    commands = set(re.findall(r"ci_stacks\.py ([\w-]+)", text))
    assert commands == {"preview", "deploy", "deploy-guard", "expired", "teardown-guard", "cost"}
    assert re.findall(r"image/tag\.py ([\w-]+)", text) == ["github-output"]


# ============================================================================================== ci_stacks
STACKS = ["dev", "existing-ecs", "multinode"]


@pytest.mark.parametrize("changed, expected", [
    (["stacks/Pulumi.dev.yaml"], ["dev"]),
    (["stacks/Pulumi.dev.yaml", "docs/policy.md", "README.md"], ["dev"]),
    (["docs/policy.md", "tests/test_plan.py", ".github/workflows/pr.yml"], []),
    (["stacks/Pulumi.gone.yaml"], []),                       # a deleted stack has nothing to preview
    (["stacks/stack.schema.json"], []),
    (["components/config/__init__.py"], STACKS),
    (["__main__.py"], STACKS),
    (["policy/verl_ack_policy/checks.py"], STACKS),          # the policy pack changes what preview reports
    (["image/Dockerfile"], STACKS),                          # the program may pin the image by its hash
    (["brand-new-folder/x.py"], STACKS),                     # unknown paths count as program code
])
def test_a_stack_file_touches_its_stack_and_program_code_touches_all(changed, expected):
    assert ci_stacks.stacks_touched(changed, STACKS) == expected


def write_stack(tmp_path: Path, name: str, settings: dict) -> None:
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {"verl-ack:settings": settings}}))


def test_only_stacks_marked_deploy_on_merge_are_deployed(tmp_path):
    write_stack(tmp_path, "dev", {"name": "verl-dev", "deploy_on_merge": True})
    write_stack(tmp_path, "multinode", {"name": "verl-multi"})
    write_stack(tmp_path, "loose", {"name": "x", "deploy_on_merge": "yes"})  # only a real boolean counts
    assert ci_stacks.stack_names(tmp_path) == ["dev", "loose", "multinode"]
    assert ci_stacks.deploy_marked(["dev", "loose", "multinode"], tmp_path) == ["dev"]


def test_stack_files_with_names_pulumi_would_refuse_are_ignored(tmp_path):
    write_stack(tmp_path, "ok_1.2-x", {})
    write_stack(tmp_path, "bad name$(x)", {})
    assert ci_stacks.stack_names(tmp_path) == ["ok_1.2-x"]


def test_the_repository_stacks_are_discovered():
    assert ci_stacks.stack_names() == sorted(p.name[len("Pulumi."):-len(".yaml")]
                                             for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def entry(kind: str, hours_ago: float, result: str = "succeeded") -> dict:
    end = NOW - timedelta(hours=hours_ago)
    return {"kind": kind, "result": result, "startTime": (end - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "endTime": end.strftime("%Y-%m-%dT%H:%M:%S.000Z")}


@pytest.mark.parametrize("history, ttl, expired", [
    ([entry("update", 25)], 24, True),
    ([entry("update", 23)], 24, False),
    ([entry("refresh", 1), entry("preview", 2), entry("update", 30)], 24, True),   # refreshes do not renew the TTL
    ([entry("update", 2), entry("update", 30)], 24, False),                          # the latest deploy counts
    ([entry("destroy", 10), entry("update", 30)], 24, False),                        # already torn down
    ([entry("update", 30, result="failed")], 24, True),                              # a failed up may leave resources
    ([entry("update", 0.1, result="in-progress"), entry("update", 30)], 24, False),  # never race a running update
    ([], 24, False),
    ([entry("update", 1000)], None, False),                                           # no ttl_hours: never expires
])
def test_a_stack_expires_ttl_hours_after_its_last_deploy(history, ttl, expired):
    assert ci_stacks.ttl_expired(history, ttl, NOW) is expired


def test_history_times_without_fractional_seconds_parse_too():
    assert ci_stacks.last_deployed_at([{"kind": "update", "startTime": "2026-11-30T10:00:00Z"}]) == \
        datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


PLAN = """# verl-ack offline plan: stack `dev`

## GPU layout

| layout | value |

## Cost estimate

| item | per hour |
|---|---|
| GPU nodes | 1 x 30.00 |

Estimate only.

## Resources

| # | type |
"""


def test_the_cost_comment_quotes_only_the_plans_cost_section_under_a_per_stack_marker():
    body = ci_stacks.cost_comment("dev", PLAN)
    assert body.startswith("<!-- verl-ack-cost:dev -->\n")
    assert "### Cost estimate" in body and "GPU nodes | 1 x 30.00" in body and "Estimate only." in body
    assert "GPU layout" not in body and "## Resources" not in body


def test_the_cost_comment_names_the_training_image_from_the_plan(tmp_path, capsys):
    import json

    (tmp_path / "plan.md").write_text(PLAN)
    (tmp_path / "plan.json").write_text(json.dumps({"outputs": {"training_image": "reg/ns/verl:abc123"}}))
    assert ci_stacks.main(["cost", "--stack", "dev", "--plan", str(tmp_path / "plan.md")]) == 0
    assert "Training image: `reg/ns/verl:abc123`" in capsys.readouterr().out


def test_a_plan_without_a_cost_section_gets_no_comment(tmp_path, capsys):
    assert ci_stacks.cost_comment("dev", "# plan\n\n## Resources\n") is None
    (tmp_path / "plan.md").write_text("# plan\n")
    assert ci_stacks.main(["cost", "--stack", "dev", "--plan", str(tmp_path / "plan.md")]) == 0
    assert capsys.readouterr().out == ""


def test_a_dispatched_teardown_names_an_existing_stack(capsys):
    assert ci_stacks.main(["expired", "--stack", "dev"]) == 0
    assert json.loads(capsys.readouterr().out) == ["dev"]
    assert ci_stacks.main(["expired", "--stack", "no-such-stack"]) == 2


def test_the_change_report_runs_for_every_touched_stack_against_its_merge_base_program_without_credentials():
    job = jobs("pr.yml")["change-report"]
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    script = "\n".join(step.get("run", "") for step in steps(job))
    assert 'base=$(git merge-base "$BASE_SHA" "$HEAD_SHA")' in script
    # the base is rendered by the program at the merge base (a code change shows), not by the PR's program
    assert '--base-ref "$base"' in script and "--base-config-file" not in script
    assert 'git cat-file -e "$base:stacks/Pulumi.$STACK.yaml"' in script
    assert "secrets." not in yaml.safe_dump(job) and not job.get("environment")
    checkout = next(s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0


# ============================================================================================== races
def up_entry(hours_ago: float, sha: str | None = None, result: str = "succeeded", kind: str = "update") -> dict:
    e = entry(kind, hours_ago, result)
    e["environment"] = {"git.head": sha} if sha else {}
    e["message"] = f"deploy.yml: {sha}" if sha else ""
    return e


def paged(entries: list[dict], size: int):
    """A fake `pulumi stack history --page-size SIZE --page N`, recording the pages asked for."""
    asked: list[int] = []

    def fetch(page: int) -> list[dict]:
        asked.append(page)
        return entries[(page - 1) * size: page * size]
    return fetch, asked


def test_the_history_is_read_past_its_first_page_until_the_entry_that_decides():
    # Ten failed hourly destroys push the deploy off a 10-entry page: the stack must still be found expired.
    entries = [entry("destroy", h, result="failed") for h in range(1, 11)] + [entry("update", 30)]
    fetch, asked = paged(entries, 10)
    assert ci_stacks.ttl_expired(ci_stacks.history_entries(fetch, page_size=10), 24, NOW) is True
    assert asked == [1, 2]


def test_the_history_stops_at_the_deciding_entry_and_at_a_short_page():
    fetch, asked = paged([entry("update", 30)] + [entry("refresh", 40)] * 30, 10)
    assert ci_stacks.ttl_expired(ci_stacks.history_entries(fetch, page_size=10), 24, NOW) is True
    assert asked == [1]
    fetch, asked = paged([entry("refresh", 1)] * 3, 10)
    assert list(ci_stacks.history_entries(fetch, page_size=10)) == [entry("refresh", 1)] * 3 and asked == [1]


def test_a_history_without_a_deciding_entry_in_reach_is_refused_not_guessed():
    fetch, _ = paged([entry("refresh", 1)] * 100, 10)
    with pytest.raises(ci_stacks.HistoryUnreadable):
        ci_stacks.ttl_expired(ci_stacks.history_entries(fetch, page_size=10, max_pages=3), 24, NOW)


class Proc:
    def __init__(self, returncode: int, stdout: str = "", stderr: str = ""):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.mark.parametrize("proc", [Proc(1, stderr="error: [401] Unauthorized"), Proc(0, stdout="<html>"),
                                  Proc(0, stdout='{"kind": "update"}')])
def test_an_unreadable_history_fails_closed(monkeypatch, proc):
    monkeypatch.setattr(ci_stacks.subprocess, "run", lambda *a, **k: proc)
    with pytest.raises(ci_stacks.HistoryUnreadable):
        ci_stacks._history_page("dev", 1)


def test_a_stack_the_backend_never_created_has_an_empty_history(monkeypatch):
    monkeypatch.setattr(ci_stacks.subprocess, "run",
                        lambda *a, **k: Proc(255, stderr="error: no stack named 'dev' found"))
    assert ci_stacks._history_page("dev", 1) == []


def test_history_is_asked_for_in_pages(monkeypatch):
    seen = []
    monkeypatch.setattr(ci_stacks.subprocess, "run", lambda cmd, **k: seen.append(cmd) or Proc(0, stdout="[]"))
    assert list(ci_stacks._history("dev")) == []
    assert seen[0][-4:] == ["--page-size", str(ci_stacks.HISTORY_PAGE_SIZE), "--page", "1"]


def _fake_repo(monkeypatch, *, settings: dict[str, dict], pages: dict[str, object], head: str = "b" * 40,
               ancestors: set[tuple[str, str]] = frozenset(), changed: list[str] = (), versions=()):
    monkeypatch.setattr(ci_stacks, "stack_names", lambda: sorted(settings))
    monkeypatch.setattr(ci_stacks, "stack_settings", lambda stack, stacks_dir=None: settings[stack])

    def page(stack, n):
        got = pages.get(stack, [])
        if isinstance(got, Exception):
            raise got
        return got if n == 1 else []
    monkeypatch.setattr(ci_stacks, "_history_page", page)
    monkeypatch.setattr(ci_stacks, "_head", lambda: head)
    monkeypatch.setattr(ci_stacks, "_is_ancestor", lambda a, b: (a, b) in ancestors)
    monkeypatch.setattr(ci_stacks, "_git_changed", lambda a, b, merge_base: list(changed))
    monkeypatch.setattr(ci_stacks, "_ttl_versions", lambda stack: list(versions))
    monkeypatch.setattr(ci_stacks, "_now", lambda: NOW)


def outputs(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_the_select_job_hands_a_stack_with_an_unreadable_history_to_the_lock(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={"a": {"ttl_hours": 1}, "b": {"ttl_hours": 1}, "c": {}},
               pages={"a": ci_stacks.HistoryUnreadable("401"), "b": [entry("update", 0.1)]})
    assert ci_stacks.main(["expired"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == ["a"] and "::warning::a: 401" in captured.err


OLD, NEW = "a" * 40, "b" * 40


def test_inside_the_lock_a_teardown_skips_a_stack_deployed_after_the_select_job_saw_it(monkeypatch, capsys):
    # The hourly tick found `dev` expired while a merge's deploy waited for its reviewer; the deploy then ran
    # first. The guard reads the history again inside the lock and keeps the fresh stack.
    _fake_repo(monkeypatch, settings={"dev": {"ttl_hours": 24}}, pages={"dev": [up_entry(0.2, NEW), up_entry(30, OLD)]},
               head=NEW)
    assert ci_stacks.main(["teardown-guard", "--stack", "dev"]) == 0
    assert outputs(capsys.readouterr().out) == {"destroy": "false"}


def test_inside_the_lock_an_expired_stack_is_destroyed(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={"dev": {"ttl_hours": 24}}, pages={"dev": [up_entry(30, NEW)]}, head=NEW)
    assert ci_stacks.main(["teardown-guard", "--stack", "dev"]) == 0
    assert outputs(capsys.readouterr().out) == {"destroy": "true"}


def test_a_teardown_that_would_undo_an_owed_deploy_fails_loudly(monkeypatch, capsys):
    # A queued teardown took the pending slot of a deploy (GitHub cancels the pending job): main has a commit for
    # the stack that never deployed. Destroying would silently undo the merge.
    _fake_repo(monkeypatch, settings={"dev": {"ttl_hours": 24, "deploy_on_merge": True}},
               pages={"dev": [up_entry(30, OLD)]}, head=NEW, changed=["stacks/Pulumi.dev.yaml"], ancestors={(OLD, NEW)})
    assert ci_stacks.main(["teardown-guard", "--stack", "dev"]) == 1
    captured = capsys.readouterr()
    assert "destroy" not in outputs(captured.out) and "a deploy of this stack is owed" in captured.err


def test_a_stack_deployed_from_outside_mains_history_owes_main_nothing(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={"dev": {"ttl_hours": 24, "deploy_on_merge": True}},
               pages={"dev": [up_entry(30, "c" * 40)]}, head=NEW, changed=["stacks/Pulumi.dev.yaml"])
    assert ci_stacks.main(["teardown-guard", "--stack", "dev"]) == 0
    assert outputs(capsys.readouterr().out) == {"destroy": "true"}


def test_an_unreadable_history_inside_the_lock_fails_the_teardown(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={"dev": {"ttl_hours": 24}}, pages={"dev": ci_stacks.HistoryUnreadable("boom")})
    assert ci_stacks.main(["teardown-guard", "--stack", "dev"]) == 1
    assert "::error::dev: boom" in capsys.readouterr().err


def test_a_platform_with_running_experiments_is_not_torn_down_even_on_request(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={
        "plat": {"kind": "platform", "ttl_hours": 1},
        "exp": {"kind": "experiment", "platform_stack": "organization/verl-ack/plat"},
        "gone": {"kind": "experiment", "platform_stack": "organization/verl-ack/plat"},
    }, pages={"plat": [up_entry(30, NEW)], "exp": [up_entry(1, NEW)], "gone": [entry("destroy", 1), up_entry(5, NEW)]})
    assert ci_stacks.main(["teardown-guard", "--stack", "plat", "--requested"]) == 1
    err = capsys.readouterr().err
    assert "experiment stack(s) exp run on this platform" in err and "gone" not in err


def test_the_shipped_platforms_experiments_are_found_from_their_stack_files():
    assert ci_stacks.dependent_experiments("dev-platform", ci_stacks.stack_names()) == ["dev-grpo", "dev-sweep"]


def test_a_requested_teardown_skips_the_ttl_but_not_the_checks():
    assert ci_stacks.teardown_decision(requested=True, ttl_hours=None, history=[], now=NOW) == (
        True, "requested by workflow_dispatch (the TTL is not consulted)")
    with pytest.raises(ci_stacks.Refused):
        ci_stacks.teardown_decision(requested=False, ttl_hours=24, now=NOW,
                                    history=[up_entry(0.1, NEW, result="in-progress"), up_entry(30, OLD)])


def test_a_ttl_counts_from_the_commit_that_set_it_not_from_a_month_old_deploy():
    history = [up_entry(24 * 30, OLD)]
    set_an_hour_ago = NOW - timedelta(hours=1)
    assert ci_stacks.ttl_expired(history, 24, NOW) is True
    assert ci_stacks.ttl_expired(history, 24, NOW, ttl_set_at=set_an_hour_ago) is False
    assert ci_stacks.ttl_expired(history, 24, NOW + timedelta(hours=23), ttl_set_at=set_an_hour_ago) is True
    # a deploy after the TTL was set counts from the deploy
    assert ci_stacks.ttl_expired([up_entry(2, NEW)], 24, NOW, ttl_set_at=NOW - timedelta(hours=100)) is False


def test_the_ttl_start_is_the_oldest_commit_of_the_newest_run_with_todays_value():
    t = [NOW - timedelta(days=d) for d in range(5)]
    assert ci_stacks.ttl_started_at([(t[0], 24), (t[1], 24), (t[2], None), (t[3], 24)]) == t[1]
    assert ci_stacks.ttl_started_at([(t[0], 12), (t[1], 24)]) == t[0]   # a changed TTL restarts the clock
    assert ci_stacks.ttl_started_at([(t[0], 24), (t[4], 24)]) == t[4]
    assert ci_stacks.ttl_started_at([]) is None


@pytest.mark.parametrize("history, ancestors, expected", [
    ([], set(), True),                                                   # never deployed
    ([up_entry(1, NEW)], set(), True),                                   # the same commit again
    ([up_entry(1, OLD)], {(OLD, NEW)}, True),                            # a newer commit
    ([entry("refresh", 0.5), up_entry(1, OLD, result="failed")], {(OLD, NEW)}, True),
])
def test_the_deploy_guard_deploys_the_same_or_a_newer_commit(history, ancestors, expected):
    assert ci_stacks.deploy_decision(history, NEW, lambda a, b: (a, b) in ancestors)[0] is expected


def test_the_deploy_guard_never_deploys_a_commit_older_than_the_deployed_one(monkeypatch, capsys):
    # An older push's job took the pending slot and runs after the newer one deployed.
    _fake_repo(monkeypatch, settings={"dev": {"deploy_on_merge": True}}, pages={"dev": [up_entry(0.1, NEW)]},
               head=OLD, ancestors={(OLD, NEW)})
    assert ci_stacks.main(["deploy-guard", "--stack", "dev"]) == 0
    assert outputs(capsys.readouterr().out) == {"deploy": "false", "sha": OLD}


@pytest.mark.parametrize("history", [[up_entry(1, "c" * 40)], [up_entry(1, None)]],
                         ids=["diverged", "no-commit-recorded"])
def test_the_deploy_guard_refuses_a_deployed_commit_it_cannot_place(monkeypatch, capsys, history):
    _fake_repo(monkeypatch, settings={"dev": {"deploy_on_merge": True}}, pages={"dev": history}, head=NEW)
    assert ci_stacks.main(["deploy-guard", "--stack", "dev"]) == 1
    assert "::error::dev:" in capsys.readouterr().err


def test_the_deploy_guard_rereads_deploy_on_merge_from_mains_tip(monkeypatch, capsys):
    _fake_repo(monkeypatch, settings={"dev": {}}, pages={"dev": []}, head=NEW)
    assert ci_stacks.main(["deploy-guard", "--stack", "dev"]) == 0
    assert outputs(capsys.readouterr().out)["deploy"] == "false"


def test_the_deploy_guard_reads_the_commit_from_the_message_when_the_environment_lacks_it():
    e = entry("update", 1)
    e["message"] = f"deploy.yml: {OLD}"
    assert ci_stacks.last_deployed_commit([e]) == (True, OLD)


# ============================================================================================== race wiring
def guarded(job: dict, guard_id: str, output: str) -> tuple[dict, list[dict]]:
    """The guard step and the steps after it; asserts the cloud steps run only on its yes."""
    ids = [s.get("id") for s in steps(job)]
    i = ids.index(guard_id)
    after = steps(job)[i + 1:]
    login = next(s for s in after if s.get("uses", "").startswith(OIDC_ACTION + "@"))
    for s in [login] + after[after.index(login) + 1:]:
        assert s.get("if") == f"steps.{guard_id}.outputs.{output} == 'true'", s.get("name")
    return steps(job)[i], steps(job)[:i]


@pytest.mark.parametrize("name, job_id, command, output", [
    ("deploy.yml", "up", "deploy-guard", "deploy"), ("teardown.yml", "teardown", "teardown-guard", "destroy")])
def test_each_cloud_change_is_decided_inside_the_per_stack_lock_from_mains_tip(name, job_id, command, output):
    job = jobs(name)[job_id]
    assert job["concurrency"]["group"] == "pulumi-stack-${{ matrix.stack }}"
    guard, before = guarded(job, "guard", output)
    assert f'ci_stacks.py {command} --stack "$STACK"' in guard["run"] and '>> "$GITHUB_OUTPUT"' in guard["run"]
    assert guard["env"]["STACK"] == "${{ matrix.stack }}"
    checkout = next(s for s in before if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "main" and checkout["with"]["fetch-depth"] == 0
    assert any("pulumi/actions" in s.get("uses", "") and "command" not in s.get("with", {}) for s in before)


def test_the_deployed_commit_is_recorded_for_the_next_guard():
    up = next(s for s in steps(jobs("deploy.yml")["up"]) if (s.get("with") or {}).get("command") == "up")
    assert up["with"]["message"] == "deploy.yml: ${{ steps.guard.outputs.sha }}"
    assert ci_stacks.DEPLOY_MESSAGE.search("deploy.yml: " + OLD)["sha"] == OLD


def test_a_dispatched_teardown_passes_requested_and_a_scheduled_one_does_not():
    guard = next(s for s in steps(jobs("teardown.yml")["teardown"]) if s.get("id") == "guard")
    assert guard["env"]["EVENT"] == "${{ github.event_name }}"
    assert 'if [ "$EVENT" = workflow_dispatch ]; then requested=(--requested); fi' in guard["run"]


def test_the_teardown_select_job_only_pre_filters_and_reads_git_history():
    job = jobs("teardown.yml")["select"]
    assert job["permissions"] == {"contents": "read"} and "id-token" not in yaml.safe_dump(job)
    checkout = next(s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0


# ============================================================================================== installs
def _lock_pins(path: Path) -> dict[str, str]:
    text = path.read_text()
    blocks = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})+)", text, re.MULTILINE)
    pins = {name.lower().replace("_", "-"): version for name, version, _ in blocks}
    requirements = re.findall(r"^[A-Za-z0-9_.-]+==", text, re.MULTILINE)
    assert len(requirements) == len(blocks), f"{path.name}: a requirement without --hash"
    return pins


@pytest.mark.parametrize("req", ["requirements.txt", "policy/requirements.txt"])
def test_each_runtime_lock_pins_its_requirements_at_the_same_versions_with_hashes(req):
    lock = (REPO / req).with_name("requirements.lock")
    pins = _lock_pins(lock)
    direct = {m[1].lower().replace("_", "-"): m[2]
              for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO / req).read_text(), re.MULTILINE)}
    assert {k: pins.get(k) for k in direct} == direct, "run `make lock` after moving a pin"
    assert "--generate-hashes" in lock.read_text() and "requirements.txt" in lock.read_text().split("\n\n")[0]


def test_deploy_teardown_and_preview_run_the_program_from_the_hash_locked_runtime_install():
    makefile = (REPO / "Makefile").read_text()
    rule = makefile[makefile.index("$(RUNTIME_VENV)/.installed: requirements.lock"):].split("\n\n")[0]
    assert "--require-hashes" in rule and "--no-deps" in rule and "--only-binary :all:" in rule
    for name, job_id in [("deploy.yml", "up"), ("teardown.yml", "teardown"), ("pr.yml", "preview")]:
        scripts = "\n".join(s.get("run", "") for s in steps(jobs(name)[job_id]))
        assert "make runtime RUNTIME_VENV=.venv" in scripts, f"{name}:{job_id}"
        assert "make setup" not in scripts and "requirements-dev" not in scripts, f"{name}:{job_id}"
        if "policy/.venv" in scripts:
            assert "--require-hashes --no-deps" in scripts and "-r policy/requirements.lock" in scripts


@pytest.mark.parametrize("changed", [["Makefile"], ["requirements-dev.txt"], ["requirements-verl.txt"],
                                     ["requirements-torch.txt"], ["requirements.lock"], ["policy/requirements.lock"]])
def test_changes_to_requirements_files_and_the_makefile_preview_every_stack(changed):
    assert ci_stacks.stacks_touched(changed, STACKS) == STACKS


# ============================================================================================== environments
def test_a_manual_teardown_needs_the_reviewed_environment_and_the_schedule_does_not():
    assert jobs("teardown.yml")["teardown"]["environment"] == TEARDOWN_ENVIRONMENT
    table = (REPO / "docs" / "workflows.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| `teardown-manual` |"))
    assert "required reviewers" in row and "`main` only" in row


def test_the_image_push_credentials_live_in_the_main_only_image_environment():
    for job_id, job in jobs("image.yml").items():
        assert job["environment"] == "image", job_id
        assert job["if"] == "github.ref == 'refs/heads/main'", job_id
    row = next(line for line in (REPO / "docs" / "workflows.md").read_text().splitlines()
               if line.startswith("| `image` |"))
    assert "ACR_USERNAME" in row and "`main` only" in row


# ============================================================================================== the relay, run
FAKE_GH = r'''#!/usr/bin/env python3
import json, os, re, sys
state = json.load(open(os.environ["FAKE_GH_STATE"]))
args = sys.argv[1:]
assert args[0] == "api", args
args = args[1:]
method = "GET"
if args[0] == "-X":
    method, args = args[1], args[2:]
path, rest = args[0], args[1:]
log = open(os.environ["FAKE_GH_LOG"], "a")
if method == "GET" and re.fullmatch(r"repos/o/r/contents/stacks\?ref=main", path):
    print("\n".join(state["stacks"]))
elif method == "GET" and (m := re.fullmatch(r"repos/o/r/pulls/(\d+)", path)):
    print(state["heads"].get(m[1], ""))
elif method == "GET" and (m := re.fullmatch(r"repos/o/r/issues/(\d+)/comments", path)):
    jq = rest[rest.index("--jq") + 1]
    bot = re.search(r'\.user\.login == "([^"]+)"', jq)
    marker = re.search(r'startswith\("([^"]+)"\)', jq)[1]
    for c in state["comments"].get(m[1], []):
        if c["body"].startswith(marker) and (bot is None or c["user"] == bot[1]):
            print(c["id"])
elif method in ("POST", "PATCH"):
    body = open(rest[rest.index("-F") + 1].split("=@", 1)[1]).read()
    log.write(json.dumps({"method": method, "path": path, "body": body}) + "\n")
else:
    sys.exit(f"unmocked gh call {method} {path}")
'''


def run_relay(tmp_path, reports: dict[str, dict[str, str]], *, comments=None, heads=None,
              **env_over: str) -> list[dict]:
    import os
    import shutil
    import subprocess
    import sys

    if not shutil.which("bash"):
        pytest.skip("needs bash")
    job = DOCS["pr-comment.yml"]["jobs"]["relay"]
    step = next(s for s in steps(job) if "run" in s)
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    (bindir / "gh").write_text(FAKE_GH)
    (bindir / "gh").chmod(0o755)
    # The fake's `#!/usr/bin/env python3` finds this interpreter first: no version-manager shim (pyenv's costs
    # ~0.1 s a call, and one relay run makes dozens).
    (bindir / "python3").symlink_to(sys.executable)
    state = {"stacks": [f"Pulumi.{s}.yaml" for s in ci_stacks.stack_names()] + ["stack.schema.json"],
             "heads": heads or {"7": "f" * 40}, "comments": comments or {}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    for name, files in reports.items():
        folder = tmp_path / "reports" / name
        folder.mkdir(parents=True)
        for fname, text in files.items():
            (folder / fname).write_text(text)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_GH_STATE": str(tmp_path / "state.json"),
           "FAKE_GH_LOG": str(tmp_path / "log"), "GITHUB_REPOSITORY": "o/r", "RUN_HEAD_SHA": "f" * 40,
           "DEFAULT_BRANCH": "main", **{k: str(v) for k, v in step["env"].items() if not str(v).startswith("${{")},
           **env_over}
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def report(stack: str, body: str = "### report\n", pr: str = "7") -> dict[str, str]:
    return {"pr": pr + "\n", "stack": stack + "\n", "head": "f" * 40 + "\n", "comment.md": "<!-- forged -->\n" + body}


def test_the_relay_posts_only_for_stacks_of_the_default_branch_and_each_once(tmp_path):
    posts = run_relay(tmp_path, {
        "change-report-dev": report("dev"),
        "change-report-dev-again": report("dev", "### second\n"),
        "change-report-evil": report("fork-only-stack"),
        "change-report-schema": report("stack.schema"),
    })
    assert [(p["method"], p["path"]) for p in posts] == [("POST", "repos/o/r/issues/7/comments")]
    assert posts[0]["body"].startswith("<!-- verl-ack-changes:dev -->\n") and "forged" not in posts[0]["body"]


def test_the_relay_caps_how_many_comments_one_run_posts(tmp_path):
    many = {f"change-report-{i:02d}": report(s) for i, s in enumerate(ci_stacks.stack_names() * 5)}
    assert len(run_relay(tmp_path / "a", many)) == len(ci_stacks.stack_names())  # one per stack, however many
    assert len(run_relay(tmp_path / "b", many, MAX_REPORTS="2")) == 2


def test_the_relay_neutralises_mentions_and_cuts_long_bodies(tmp_path):
    [post] = run_relay(tmp_path, {"change-report-dev": report("dev", "ping @octocat and @org/team\n" + "x" * 70000)})
    assert "@octocat" not in post["body"] and "@\u200boctocat" in post["body"] and "@\u200borg/team" in post["body"]
    assert len(post["body"].encode()) < 60100


def test_the_relay_edits_only_a_comment_the_bot_wrote(tmp_path):
    marker = "<!-- verl-ack-changes:dev -->"
    comments = {"7": [{"id": 11, "user": "mallory", "body": marker + "\nplanted"},
                      {"id": 12, "user": "github-actions[bot]", "body": marker + "\nold"}]}
    [post] = run_relay(tmp_path / "a", {"change-report-dev": report("dev")}, comments=comments)
    assert (post["method"], post["path"]) == ("PATCH", "repos/o/r/issues/comments/12")
    [post] = run_relay(tmp_path / "b", {"change-report-dev": report("dev")}, comments={"7": comments["7"][:1]})
    assert post["method"] == "POST"  # someone else's comment with the marker is never edited


def test_the_relay_skips_a_report_for_a_pr_at_another_commit(tmp_path):
    assert run_relay(tmp_path, {"change-report-dev": report("dev", pr="8")}, heads={"8": "e" * 40}) == []


def test_same_repository_comment_steps_also_edit_only_the_bots_comment():
    for job_id in ("cost", "change-report"):
        script = "\n".join(s.get("run", "") for s in steps(jobs("pr.yml")[job_id]))
        assert 'select(.user.login == \\"github-actions[bot]\\" and' in script, job_id


# ============================================================================================== linters
def _shellcheck_module():
    from importlib.machinery import SourceFileLoader

    path = str(REPO / ".ci" / "shellcheck-workflows")  # no .py suffix: load it by an explicit loader
    loader = SourceFileLoader("shellcheck_workflows", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("shellcheck_workflows", loader))
    loader.exec_module(module)
    return module


def _need_shellcheck():
    import os
    import shutil

    if shutil.which("shellcheck") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs shellcheck (.ci/run installs it from Debian)")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")


def test_every_run_script_of_every_workflow_is_handed_to_shellcheck():
    found = _shellcheck_module().scripts()
    assert len(found) == sum(1 for *_, step in all_steps() if "run" in step)
    for label, text in found:
        assert "${{" not in text, label  # expressions are placeholders: shellcheck parses the shell around them


def test_shellcheck_finds_nothing_in_the_workflows_and_scripts():
    import subprocess
    import sys

    _need_shellcheck()
    done = subprocess.run([sys.executable, str(REPO / ".ci" / "shellcheck-workflows"), "-f", "gcc"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_shellcheck_would_catch_an_unquoted_variable_in_a_run_script(tmp_path):
    import subprocess

    _need_shellcheck()
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nset -e\nstack=$1\nrm -rf out/$stack\n")
    assert subprocess.run(["shellcheck", "--shell=bash", str(bad)], capture_output=True).returncode != 0


def test_ci_and_pull_requests_run_zizmor_offline_pinned_in_its_own_venv_and_shellcheck():
    makefile = (REPO / "Makefile").read_text()
    rule = makefile[makefile.index("lint-workflows: setup"):].split("\n\n")[0]
    assert re.search(r"^ZIZMOR := \d+\.\d+\.\d+$", makefile, re.MULTILINE) and '"zizmor==$(ZIZMOR)"' in rule
    assert "zizmor --offline --persona=auditor .github/workflows/" in rule and ".ci/shellcheck-workflows" in rule
    ci = (REPO / ".ci" / "run").read_text()
    assert "make lint-workflows" in ci and "apt-get install -y --no-install-recommends shellcheck" in ci
    assert ci.index("make lint-workflows") < ci.index("make test")
    assert "make lint-workflows" in "\n".join(s.get("run", "") for s in steps(jobs("pr.yml")["test"]))


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_zizmor_ignore_says_why(name):
    for line in (WORKFLOWS / name).read_text().splitlines():
        if "zizmor: ignore[" in line:
            assert re.search(r"zizmor: ignore\[[a-z-]+\] \S.{20,}", line), f"{name}: {line.strip()}"
