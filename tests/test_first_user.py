"""What a first user types wrong gets an answer: a message with the field and the fix and an exit code, never a
traceback or silence (issue 22 items 5-10)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

import plan
import teardown
from components.config import STACKS_DIR, SettingsError, raw_settings
from components.config.placeholders import placeholders
from components.model import parse_settings
from offline import plan as offline_plan
from tests.conftest import REAL_DEV_VALUES, STACKS, deep_merge, stack_settings

REPO = offline_plan.REPO


def _dev_doc() -> dict:
    return yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())


def _plan_file(tmp_path, capsys, text: str) -> tuple[int, str]:
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(text)
    rc = plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


# --------------------------------------------------------------------------------------------- item 5
def test_plan_takes_a_stack_file_path_given_to_stack_and_names_the_stack_after_it(tmp_path, capsys):
    assert plan.main(["--stack", "stacks/Pulumi.dev.yaml", "--out", str(tmp_path / "o")]) == 0
    assert "stack dev:" in capsys.readouterr().out


def test_a_mistyped_stack_name_exits_2_suggesting_the_close_one_and_listing_the_stacks(tmp_path, capsys):
    assert plan.main(["--stack", "dve", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "did you mean `--stack dev`?" in err and "dev-platform" in err and "Traceback" not in err


def test_a_missing_file_path_exits_2_saying_what_to_give(tmp_path, capsys):
    assert plan.main(["--stack", str(tmp_path / "Pulumi.none.yaml")]) == 2
    assert "Give a stack name" in capsys.readouterr().err


def test_teardown_takes_a_stack_file_path_as_plan_does_and_destroys_the_stack_it_names(tmp_path):
    args = teardown.parse_args(["--stack", "stacks/Pulumi.dev.yaml", "--dry-run"])
    assert (args.stack, args.stack_file) == ("dev", "stacks/Pulumi.dev.yaml")
    copy = tmp_path / "Pulumi.mine.yaml"
    copy.write_text((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    seen = []
    teardown.main(["--stack", str(copy), "--dry-run"], load_stack=lambda f: seen.append(f) or _raise(),
                  err=lambda line: None)
    assert seen == [str(copy)]  # the file given is the file read
    with pytest.raises(SystemExit) as info:
        teardown.parse_args(["--stack", str(tmp_path / "mine.yaml")])
    assert info.value.code == 2  # no stack name in the file name: `pulumi destroy --stack` would get a guess


def _raise():
    raise teardown.StackError("stop here")


def test_teardown_lists_every_problem_of_an_invalid_stack_file_with_exit_2(tmp_path, monkeypatch):
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"]["gpu_pool"]["nodes"] = 0
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setattr("components.config.loading.STACKS_DIR", tmp_path)
    errors: list[str] = []
    assert teardown.main(["--stack", "bad", "--dry-run"], err=errors.append) == 2
    assert "gpu_pool.nodes" in errors[0] and "nothing copied or destroyed" in errors[0]


@pytest.mark.parametrize("script,args", [("plan.py", ["--stack", "dev"]), ("teardown.py", ["--stack", "dev"]),
                                         ("benchmark.py", [])])
def test_an_entry_point_run_outside_the_virtualenv_says_what_to_run_instead_of_a_traceback(script, args):
    # -S: no site-packages, as a system Python without the pinned packages.
    run = subprocess.run([sys.executable, "-S", script, *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert f".venv/bin/python {script}" in run.stderr and "pinned Python packages" in run.stderr


# --------------------------------------------------------------------------------------------- item 6
def test_a_misspelled_settings_key_is_one_problem_suggesting_the_right_key(tmp_path, capsys):
    text = (STACKS_DIR / "Pulumi.dev.yaml").read_text().replace("verl-ack:settings:", "verl-ack:setings:")
    rc, err = _plan_file(tmp_path, capsys, text)
    assert rc == 2 and "1 problem(s)" in err
    assert "verl-ack:setings: unknown config key; did you mean verl-ack:settings?" in err
    assert "Field required" not in err


def test_an_empty_stack_file_is_one_problem_saying_what_to_add(tmp_path, capsys):
    rc, err = _plan_file(tmp_path, capsys, "")
    assert rc == 2 and "1 problem(s)" in err and "verl-ack:settings: missing" in err and "Field required" not in err


def test_an_unknown_project_key_or_namespace_is_refused_with_the_keys_there_are(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["verl-ack:hfTokn"] = {"secure": "v1:abc"}
    doc["config"]["verlack:settings"] = {}
    rc, err = _plan_file(tmp_path, capsys, yaml.safe_dump(doc))
    assert rc == 2
    assert "verl-ack:hfTokn: unknown config key; did you mean verl-ack:hfToken?" in err
    assert "verlack:settings: no package of this program reads the namespace 'verlack'; did you mean verl-ack" in err


def test_a_key_without_namespace_is_the_projects_as_the_pulumi_cli_reads_it(tmp_path, capsys):
    text = (STACKS_DIR / "Pulumi.dev.yaml").read_text().replace("  verl-ack:settings:", "  settings:")
    rc, _ = _plan_file(tmp_path, capsys, text)
    assert rc == 0


# --------------------------------------------------------------------------------------------- item 7
def test_a_plaintext_secret_in_a_stack_file_is_refused_naming_the_key_and_the_command(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["verl-ack:sandboxApiKey"] = "0123456789abcdef"
    rc, err = _plan_file(tmp_path, capsys, yaml.safe_dump(doc))
    assert rc == 2 and "verl-ack:sandboxApiKey: a secret written in plaintext" in err
    assert "`pulumi config set --secret sandboxApiKey <value>`" in err


def test_an_encrypted_secret_in_a_stack_file_plans(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["verl-ack:sandboxApiKey"] = {"secure": "v1:AAAABBBBCCCC"}
    assert _plan_file(tmp_path, capsys, yaml.safe_dump(doc))[0] == 0


def test_the_program_refuses_a_secret_key_the_engine_did_not_mark_secret(tmp_path):
    # In a real run the engine lists the keys stored as `secure:` (pulumi.runtime.is_config_secret); a key set
    # without --secret is missing from that list.
    config, secret_keys, _ = offline_plan.stack_config(STACKS_DIR / "Pulumi.dev.yaml")
    plain = [k for k in secret_keys if k != "verl-ack:sandboxApiKey"]
    with pytest.raises(SettingsError) as info:
        offline_plan.run_program(REPO / "__main__.py", config, plain, project=offline_plan.PROJECT, stack="dev")
    [problem] = info.value.problems
    assert problem.field == "verl-ack:sandboxApiKey" and "is set in plaintext" in problem.message
    assert "pulumi config set --secret sandboxApiKey" in problem.message


# --------------------------------------------------------------------------------------------- item 8
def test_plan_md_and_plan_json_list_the_placeholders_as_the_before_your_first_up_checklist(tmp_path):
    out = tmp_path / "p"
    result = offline_plan.build_plan(STACKS_DIR / "Pulumi.dev-platform.yaml", "dev-platform", out)
    fields = [p["field"] for p in result["sections"]["checklist"]["placeholders"]]
    assert "image.digest" in fields and "image.enterprise_instance_id" in fields
    md = (out / "plan.md").read_text()
    section = md.split("## Before your first `up`", 1)[1].split("\n## ", 1)[0]
    assert "| `image.digest` | `sha256:" + "0" * 64 + "` |" in section and "ACR console" in section


def _marked_replace(text: str) -> list[str]:
    """The dotted settings a stack file marks `# replace`, read from its indentation (not the program's parser)."""
    keys: list[tuple[int, str]] = []
    out = []
    for line in text.splitlines():
        m = re.match(r"^(\s*)([A-Za-z_][\w.:-]*):(.*)$", line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent = len(m.group(1))
        keys = [(i, k) for i, k in keys if i < indent] + [(indent, m.group(2))]
        if re.search(r"\s#\s*replace\b", m.group(3)):
            out.append(".".join(k for _, k in keys[2:]))  # below config: and verl-ack:settings:
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_the_checklist_lists_every_setting_its_stack_file_marks_replace_and_the_marks_cover_every_placeholder(
        stack, tmp_path):
    text = (STACKS_DIR / f"Pulumi.{stack}.yaml").read_text()
    marked = _marked_replace(text)
    result = offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, tmp_path / "o")
    listed = [p["field"] for p in result["sections"]["checklist"]["placeholders"]]
    assert sorted(listed) == sorted(marked)
    # every value the program recognises as a placeholder (what a real preview refuses) is marked in the file too
    recognised = {p.field.split("[")[0] for p in placeholders(parse_settings(raw_settings(STACKS_DIR / f"Pulumi.{stack}.yaml")))}
    assert recognised <= set(marked), recognised - set(marked)
    missed_before = {"dev": {"image.registry_host", "storage.bucket_name"}, "dev-platform": {"image.registry_host"},
                     "multinode": {"job.host_network_cidrs", "gpu_pool.lingjun.ray_admit_cidrs"},
                     "dev-grpo": {"platform_stack"}, "dev-sweep": {"platform_stack"}}
    assert missed_before.get(stack, set()) <= set(listed)


def test_a_stack_without_placeholders_says_so_in_the_checklist(tmp_path):
    doc = _dev_doc()
    s = doc["config"]["verl-ack:settings"]
    s.update(deep_merge(s, REAL_DEV_VALUES))
    s["sandbox"] = {"manager": "open-source"}
    s.setdefault("versions", {})["sandbox_manager_image"] = "registry-vpc.ap-southeast-1.aliyuncs.com/team/sandbox-manager:pr165"
    path = tmp_path / "Pulumi.real.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = offline_plan.build_plan(path, "real", tmp_path / "o")
    assert result["sections"]["checklist"]["placeholders"] == []
    assert "No placeholder left" in (tmp_path / "o" / "plan.md").read_text()


# --------------------------------------------------------------------------------------------- item 10
def test_an_integer_of_thousands_of_digits_is_a_problem_of_its_field_in_plan_and_teardown(tmp_path, capsys,
                                                                                           monkeypatch):
    text = (STACKS_DIR / "Pulumi.dev.yaml").read_text().replace("nodes: 1\n", "nodes: " + "9" * 5000 + "\n", 1)
    rc, err = _plan_file(tmp_path, capsys, text)
    assert rc == 2 and "gpu_pool.nodes: the number 999" in err and "does not fit in 64 bits" in err
    (tmp_path / "Pulumi.huge.yaml").write_text(text)
    monkeypatch.setattr("components.config.loading.STACKS_DIR", tmp_path)
    errors: list[str] = []
    assert teardown.main(["--stack", "huge", "--dry-run"], err=errors.append) == 2
    assert "does not fit in 64 bits" in errors[0]


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, capsys):
    text = (STACKS_DIR / "Pulumi.dev.yaml").read_text().replace("      nodes: 1\n", "      nodes: 1\n      nodes: 2\n")
    rc, err = _plan_file(tmp_path, capsys, text)
    assert rc == 2 and "the key 'nodes' is given twice (first on line" in err


@pytest.mark.parametrize("value,text", [
    ("017", "non-decimal or YAML 1.1 form"), ("0x18", "non-decimal or YAML 1.1 form"),
    ("1_000", "non-decimal or YAML 1.1 form"), ("2025-01-31", "quote it"),
])
def test_number_forms_the_pulumi_cli_and_yaml_1_1_read_differently_are_refused(tmp_path, capsys, value, text):
    src = (STACKS_DIR / "Pulumi.dev.yaml").read_text().replace("max_prompt_length: 1024", f"max_prompt_length: {value}")
    rc, err = _plan_file(tmp_path, capsys, src)
    assert rc == 2 and "training.max_prompt_length: " in err and text in err


def test_a_sexagesimal_or_yes_is_text_as_the_pulumi_cli_reads_it_and_the_field_says_what_it_wants(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text((STACKS_DIR / "Pulumi.dev.yaml").read_text()
                    .replace("max_prompt_length: 1024", "max_prompt_length: 1:30")
                    .replace("val_before_train: false", "val_before_train: no"))
    raw = raw_settings(path)
    assert raw["training"]["max_prompt_length"] == "1:30" and raw["training"]["val_before_train"] == "no"
    with pytest.raises(SettingsError) as info:
        parse_settings(raw)
    assert {p.field for p in info.value.problems} == {"training.max_prompt_length", "training.val_before_train"}


@pytest.mark.parametrize("region,zones,text", [
    ("ap-southeast-1", ["ap-southeast-10a", "ap-southeast-1b"], "like ap-southeast-1a"),
    ("cn-hangzhou", ["cn-hangzhouh", "cn-hangzhou-i"], "like cn-hangzhou-h"),
    ("ap-southeast-1", ["ap-southeast-1a", "ap-southeast-1a"], "lists a zone twice"),
])
def test_a_zone_not_spelled_as_a_zone_of_the_region_is_refused_with_the_regions_spelling(region, zones, text):
    raw = stack_settings("dev", {"region": region, "zones": zones, "gpu_pool": {"zone": zones[1]}})
    with pytest.raises(SettingsError) as info:
        parse_settings(raw)
    assert any(text in p.message for p in info.value.problems), info.value.problems


def test_a_region_that_does_not_exist_is_refused_with_the_nearest_one():
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings("dev", {"region": "ap-southeast-9", "zones": ["ap-southeast-9a", "ap-southeast-9b"],
                                              "gpu_pool": {"zone": "ap-southeast-9a"}}))
    [problem] = [p for p in info.value.problems if p.field == "region"]
    assert "is not an Alibaba Cloud region id" in problem.message


@pytest.mark.parametrize("name,value", [("HF_TOKEN", "abc"), ("MY_VAR", "hf_abcdefghijklmnop"),
                                        ("EXTRA", "LTAI5tAbCdEfGhIjKlMn"), ("DB_PASSWORD", "x")])
def test_a_credential_in_job_env_is_refused_pointing_at_secret_config(name, value):
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings("dev", {"job": {"env": {name: value}}}))
    assert any(f"job.env.{name} looks like a credential" in p.message and "pulumi config set --secret" in p.message
               for p in info.value.problems)


def test_rdma_settings_in_job_env_are_not_credentials():
    parse_settings(stack_settings("dev", {"job": {"env": {"NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"}}}))


def test_a_platform_stack_of_another_project_is_refused():
    raw = stack_settings("dev-grpo", {"platform_stack": "organization/other-project/dev-platform"})
    with pytest.raises(SettingsError) as info:
        parse_settings(raw)
    assert any("names the project 'other-project'" in p.message for p in info.value.problems)


def test_an_invalid_platform_stack_file_is_reported_as_the_platforms_file(tmp_path, monkeypatch, capsys):
    for name in ("dev-grpo", "dev-platform"):
        (tmp_path / f"Pulumi.{name}.yaml").write_text((STACKS_DIR / f"Pulumi.{name}.yaml").read_text())
    broken = tmp_path / "Pulumi.dev-platform.yaml"
    broken.write_text(broken.read_text().replace("nodes: 1\n", "nodes: 0\n", 1))
    monkeypatch.setattr("components.config.loading.STACKS_DIR", tmp_path)
    monkeypatch.setattr(offline_plan, "REPO", tmp_path)
    with pytest.raises(SettingsError) as info:
        offline_plan.render_platform(parse_settings(raw_settings(tmp_path / "Pulumi.dev-grpo.yaml")))
    [problem] = info.value.problems
    assert problem.field.startswith("platform_stack organization/verl-ack/dev-platform (Pulumi.dev-platform.yaml)")
    assert problem.field.endswith("gpu_pool.nodes")


# --------------------------------------------------------------------------------------------- item 9
def test_make_setup_announces_each_step_and_keeps_pips_package_lines_and_exit_status(tmp_path):
    run = subprocess.run(["make", "-n", "setup", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    steps = [line for line in run.stdout.splitlines() if line.startswith('echo "setup:')]
    assert len(steps) >= 4, run.stdout
    assert "set -o pipefail" in run.stdout and "Collecting" in run.stdout and "--quiet -r requirements-dev" not in run.stdout


# --------------------------------------------------------------------------------------------- every mistake at once
def test_a_stack_file_with_three_independent_mistakes_gets_all_three_in_one_run(tmp_path, capsys):
    # dev copied to two nodes: one run used to refuse the node_ids count, the next the security group, the third
    # the host-network CIDRs
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"]["gpu_pool"]["nodes"] = 2
    for key in ("security_group_id", "ray_admit_cidrs"):  # and without dev's security group
        doc["config"]["verl-ack:settings"]["gpu_pool"]["lingjun"].pop(key)
    rc, err = _plan_file(tmp_path, capsys, yaml.safe_dump(doc))
    assert rc == 2 and "3 problem(s)" in err
    for field, fix in (("gpu_pool.lingjun.node_ids", "list exactly that many EFLO node ids"),
                       ("gpu_pool.lingjun.security_group_id", "host network, so the Ray job API (8265)"),
                       ("job.host_network_cidrs", "list the GPU nodes' vSwitch CIDRs")):
        line = next(line for line in err.splitlines() if line.startswith(f"  - {field}: "))
        assert fix in line


def test_rule_problems_and_gpu_layout_problems_come_in_the_same_run():
    over = {"zones": ["ap-southeast-1a", "ap-southeast-1b"], "gpu_pool": {"zone": "ap-southeast-1c"},
            "tags": {f"k{i}": "v" for i in range(8)}, "model": {"rollout_tp": 3}}
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings("dev", over))
    fields = [p.field for p in info.value.problems]
    assert "gpu_pool.zone" in fields and "tags" in fields
    assert any(f.startswith("model.") for f in fields), fields  # the layout's own rule, not hidden behind them


def test_every_cross_field_rule_of_the_settings_reports_and_lets_the_others_run():
    from components.config import Settings

    after = {name: d for name, d in Settings.__pydantic_decorators__.model_validators.items() if d.info.mode == "after"}
    assert after and all(getattr(d.func, "collects_every_problem", False) for d in after.values()), \
        [n for n, d in after.items() if not getattr(d.func, "collects_every_problem", False)]


# --------------------------------------------------------------------------------------------- misplaced keys
@pytest.mark.parametrize("key", ["sandbox_api_key", "sandboxApiKey", "hf_token", "oss_access_key_secret"])
def test_a_secret_written_under_settings_gets_the_plaintext_secret_refusal_without_its_value(tmp_path, capsys, key):
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"][key] = "sk-LEAK-under-settings-5f2a9c"
    rc, err = _plan_file(tmp_path, capsys, yaml.safe_dump(doc))
    assert rc == 2
    line = next(line for line in err.splitlines() if line.startswith(f"  - {key}: "))
    assert "a secret written in plaintext" in line and "pulumi config set --secret" in line
    assert "unknown setting" not in line and "sk-LEAK" not in err


def test_a_misspelt_nested_key_gets_a_did_you_mean(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"]["gpu_pool"]["gpus_per_nod"] = 8
    doc["config"]["verl-ack:settings"]["cluster"]["network"]["vpcid"] = "vpc-x"
    rc, err = _plan_file(tmp_path, capsys, yaml.safe_dump(doc))
    assert rc == 2
    assert "  - gpu_pool.gpus_per_nod: unknown setting; did you mean `gpus_per_node`?" in err
    assert "  - cluster.network.vpcid: unknown setting; did you mean `vpc_id`?" in err
