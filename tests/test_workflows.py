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
# Jobs that touch the cloud: (workflow, job) -> (environment, RAM role variable). The preview role is read-only;
# the deploy role's trust policy names only the deploy and teardown environments (docs/workflows.md).
CLOUD_JOBS = {
    ("pr.yml", "preview"): ("preview", "ALIYUN_PREVIEW_ROLE_ARN"),
    ("deploy.yml", "up"): ("deploy", "ALIYUN_DEPLOY_ROLE_ARN"),
    ("teardown.yml", "teardown"): ("teardown", "ALIYUN_DEPLOY_ROLE_ARN"),
}
# Cloud and state credentials; image.yml's registry login (ACR_*) is not one of them.
CREDENTIAL_SECRET = re.compile(r"secrets\.(PULUMI_|ALICLOUD_|ALIBABA|OSS_)")

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
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
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
        return "make setup" in step.get("run", "") or "pip install" in step.get("run", "")

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
    assert job["environment"] == name.removesuffix(".yml")
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
    up = next(s for s in steps(jobs("deploy.yml")["up"]) if "pulumi/actions" in s.get("uses", ""))
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
    commands = set(re.findall(r"ci_stacks\.py (\w+)", text))
    assert commands and commands <= {"preview", "deploy", "expired", "cost"}
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


def test_the_change_report_runs_for_every_touched_stack_against_its_merge_base_file_without_credentials():
    job = jobs("pr.yml")["change-report"]
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    script = "\n".join(step.get("run", "") for step in steps(job))
    assert 'git merge-base "$BASE_SHA" "$HEAD_SHA"' in script
    assert '--base-config-file "base/Pulumi.$STACK.yaml"' in script
    assert 'git show "$base:stacks/Pulumi.$STACK.yaml"' in script
    assert "secrets." not in yaml.safe_dump(job) and not job.get("environment")
    checkout = next(s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
