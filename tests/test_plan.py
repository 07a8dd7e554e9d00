"""The offline plan: what a newcomer and a PR reviewer see of a stack without an account."""

import datetime
import json
import re
import shlex
import subprocess

import pytest
import yaml

import plan
from components.config import SECRET_KEYS, STACKS_DIR
from components.workloads.training.verl_config import CONFIG_DIR
from offline import plan as offline_plan
from tests.conftest import STACKS

LEAKY = {k: f"sk-LEAK-{k}-5f2a9c" for k in SECRET_KEYS}
LEAKY["tlsPrivateKey"] = "-----BEGIN PRIVATE KEY-----\nLEAKY\n-----END PRIVATE KEY-----"


def test_plan_writes_manifests_plan_json_and_plan_md_for_every_stack(stack_name, tmp_path, capsys):
    out = tmp_path / stack_name
    assert plan.main(["--stack", stack_name, "--out", str(out)]) == 0
    assert (out / "plan.json").is_file() and (out / "plan.md").is_file() and (out / "manifests").is_dir()
    data = json.loads((out / "plan.json").read_text())
    assert data["stack"] == stack_name and data["resources"]
    for r in data["resources"]:
        assert {"type", "name", "parent", "provider", "inputs", "dependencies"} <= set(r)
    assert "layout" in data["sections"]
    assert f"stack {stack_name}:" in capsys.readouterr().out


def test_plan_accepts_a_config_file_path(tmp_path):
    out = tmp_path / "cfg"
    assert plan.main(["--config-file", str(STACKS_DIR / "Pulumi.dev.yaml"), "--out", str(out)]) == 0
    assert json.loads((out / "plan.json").read_text())["stack"] == "dev"


def test_every_manifest_is_one_kubernetes_object_numbered_in_apply_order(tmp_path):
    out = tmp_path / "dev"
    plan.main(["--stack", "dev", "--out", str(out)])
    files = sorted((out / "manifests").glob("*.yaml"))
    numbers = [int(f.name.split("-")[0]) for f in files]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    kinds = []
    for f in files:
        docs = list(yaml.safe_load_all(f.read_text()))
        assert len(docs) == 1 and {"apiVersion", "kind", "metadata"} <= set(docs[0])
        kinds.append(docs[0]["kind"])
    if "Namespace" in kinds:
        assert kinds.index("Namespace") == 0


def test_no_secret_value_reaches_any_plan_file(stack_name, tmp_path):
    out = tmp_path / stack_name
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack_name}.yaml", stack_name, out, secret_values=LEAKY)
    for f in out.rglob("*"):
        if f.is_file():
            text = f.read_text()
            for value in LEAKY.values():
                assert value not in text, f"{f.relative_to(out)} leaks a secret"
                assert "LEAKY" not in text


def test_invalid_settings_exit_2_list_every_problem_and_write_nothing(tmp_path, capsys):
    bad = tmp_path / "Pulumi.bad.yaml"
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    s = doc["config"]["verl-ack:settings"]
    s["gpu_pool"]["nodes"] = 0
    s["storage"]["bucket_name"] = "Bad_Bucket"
    s["surprise"] = True
    bad.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert plan.main(["--config-file", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    for field in ("gpu_pool.nodes", "storage.bucket_name", "surprise"):
        assert field in err
    assert not out.exists()


def test_a_layout_error_also_exits_2_before_the_program_runs(tmp_path, capsys):
    bad = tmp_path / "Pulumi.tp.yaml"
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.multinode.yaml").read_text())
    doc["config"]["verl-ack:settings"]["model"]["rollout_tp"] = 8
    bad.write_text(yaml.safe_dump(doc))
    assert plan.main(["--config-file", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "model.rollout_tp: rollout TP 8 does not divide" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_missing_stack_file_is_an_error_not_a_traceback(tmp_path, capsys):
    assert plan.main(["--stack", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "no stack file" in capsys.readouterr().err


def test_plan_md_shows_the_job_command_one_override_per_line_and_it_is_the_same_command(tmp_path):
    out = tmp_path / "dev"
    offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", out)
    text = (out / "plan.md").read_text()
    block = text.split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = block.splitlines()
    assert lines[0] == "python3 /etc/verl-ack/config/verl_ack_entrypoint.py \\"
    assert "    python3 -m verl.trainer.main_ppo \\" in lines  # verl's program and module on one line
    entry = json.loads((out / "plan.json").read_text())["training_entrypoint"]
    assert block.replace(" \\\n    ", " ") == entry


def test_a_stack_file_that_is_not_yaml_exits_2_with_the_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "Pulumi.broken.yaml"
    bad.write_text("config:\n  verl-ack:settings: [\n")
    assert plan.main(["--config-file", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "is not valid YAML (line" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def _dev_doc() -> dict:
    return yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())


def _refused(tmp_path, capsys, data: bytes) -> str:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_bytes(data)
    out = tmp_path / "o"
    assert plan.main(["--config-file", str(bad), "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "nothing written" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("data,text", [
    (b"config:\n  verl-ack:settings:\n    name: \xe9t\xe9\n", "is not UTF-8"),
    (b"- config\n", "must be a YAML mapping"),
    (b"just a sentence\n", "must be a YAML mapping"),
    (b"config: 3\n", "must be a mapping of config keys"),
    (b"config: &c\n  verl-ack:settings: *c\n", "refers to a value that contains it"),
    (b"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     b"config:\n  verl-ack:settings: {x: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]}\n", "expands to more than"),
    (b"config:\n  verl-ack:settings: [1, 2]\n", "verl-ack:settings: must be a mapping of settings"),
])
def test_a_stack_file_that_is_not_a_settings_document_exits_2_naming_the_file_and_the_fix(tmp_path, capsys, data, text):
    assert text in _refused(tmp_path, capsys, data)


def test_a_shell_command_in_a_version_pin_exits_2_with_the_field_and_writes_nothing(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"]["versions"] = {"mlflow": "3.17.2$(touch /tmp/pwned)"}
    err = _refused(tmp_path, capsys, yaml.safe_dump(doc).encode())
    assert "versions.mlflow: '3.17.2$(touch /tmp/pwned)' is not an exact version pin" in err


@pytest.mark.parametrize("settings,field", [
    ({"training": {"experiment_name": 123}}, "training.experiment_name"),
    ({"training": {"experiment_name": "2024"}}, "training.experiment_name"),
    ({"job": {"shm_gib": 600}}, "job.shm_gib"),
    ({"training": {"rollout_engine": "sglang"}, "image": {"source": "official"}}, "training.rollout_engine"),
    ({"cost": {"seconds_per_step": float("inf")}}, "cost.seconds_per_step"),
    ({"job": {"active_deadline_seconds": 2**64}}, "job.active_deadline_seconds"),
    ({"versions": {"addons": ["alb"]}}, "versions.addons"),
    ({"tags": {"team": b"x"}}, "tags.team"),
])
def test_inputs_that_used_to_crash_the_plan_exit_2_with_the_field(tmp_path, capsys, settings, field):
    doc = _dev_doc()
    for section, value in settings.items():
        if isinstance(value, dict) and isinstance(doc["config"]["verl-ack:settings"].get(section), dict):
            doc["config"]["verl-ack:settings"][section].update(value)
        else:
            doc["config"]["verl-ack:settings"][section] = value
    err = _refused(tmp_path, capsys, yaml.safe_dump(doc).encode())
    assert f"  - {field}: " in err


def test_an_unquoted_date_in_the_stack_file_is_refused_with_the_quoted_form_and_a_quoted_one_plans(tmp_path, capsys):
    # The Pulumi CLI's YAML reader (yaml.v3) turns an unquoted date into a timestamp; quoted it is the date's text.
    doc = _dev_doc()
    doc["config"]["verl-ack:settings"]["cost"] = {"prices_taken_on": datetime.date(2025, 1, 31)}
    text = yaml.safe_dump(doc)
    assert "prices_taken_on: 2025-01-31\n" in text
    err = _refused(tmp_path, capsys, text.encode())
    assert '  - cost.prices_taken_on: 2025-01-31 is unquoted' in err and 'quote it: "2025-01-31"' in err
    path = tmp_path / "Pulumi.dated.yaml"
    path.write_text(text.replace("prices_taken_on: 2025-01-31", "prices_taken_on: '2025-01-31'"))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "o")]) == 0


def test_a_yaml_set_in_another_config_key_exits_2_naming_the_key(tmp_path, capsys):
    doc = _dev_doc()
    doc["config"]["alicloud:extra"] = {1, 2}
    assert "alicloud:extra: cannot be passed to the program" in _refused(tmp_path, capsys, yaml.safe_dump(doc).encode())


def test_the_verl_command_line_holds_only_words_every_shell_and_join_reads_verbatim(tmp_path):
    # The submitter's bash, `ray job submit`'s join (list2cmdline up to Ray 2.55, shlex.join from 2.56) and Ray's
    # job supervisor (shell=True) all read it: list settings live in the trainer file, and the close-up is the
    # entrypoint program's, so every word is a plain scalar that none of them changes.
    out = tmp_path / "dev"
    offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", out)
    entry = json.loads((out / "plan.json").read_text())["training_entrypoint"]
    assert "trainer.logger" not in entry and "[" not in entry and ";" not in entry and "$" not in entry
    words = entry.split(" ")
    assert all(shlex.quote(w) == w for w in words)
    assert subprocess.list2cmdline(words) == shlex.join(words) == entry
    assert words[:2] == ["python3", f"{CONFIG_DIR}/verl_ack_entrypoint.py"]


# --------------------------------------------------------------------------- plan.md never states what plan.json lacks
NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def _numbers_in_markdown(md: str) -> list[tuple[str, str]]:
    """(number, its line) for every number plan.md states; the mermaid charts encode the same figures as clock
    times and seconds (test_picture holds them to plan.json)."""
    md = re.sub(r"```mermaid\n.*?```", "", md, flags=re.S)
    return [(m.group().replace(",", ""), line) for line in md.splitlines() for m in NUMBER.finditer(line)]


def _json_figures(data) -> tuple[set[str], list[float]]:
    """Every number plan.json holds: its numeric values, and the numbers written inside its texts and keys."""
    words: set[str] = set()
    values: list[float] = []

    def walk(x):
        if isinstance(x, bool) or x is None:
            return
        if isinstance(x, (int, float)):
            values.append(x)
            words.add(str(x))
        elif isinstance(x, str):
            words.update(n.replace(",", "") for n in NUMBER.findall(x))
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(data)
    return words, values


def _held(number: str, words: set[str], values: list[float]) -> bool:
    decimals = len(number.split(".")[1]) if "." in number else 0
    return number in words or any(f"{v:.{decimals}f}" == number for v in values)


@pytest.mark.parametrize("stack", STACKS)
def test_every_number_plan_md_states_is_a_figure_plan_json_holds(stack, tmp_path):
    # plan.md once said "internet ALB" above "VPC only (intranet ALB)" and gave two setup times: each statement now
    # comes from the data plan.json holds, and a number in plan.md that plan.json lacks fails here.
    out = tmp_path / stack
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, out)
    words, values = _json_figures(json.loads((out / "plan.json").read_text()))
    stated = _numbers_in_markdown((out / "plan.md").read_text())
    assert len(stated) > 100
    assert [(n, line) for n, line in stated if not _held(n, words, values)] == []


def test_the_agreement_check_catches_a_figure_plan_json_lacks():
    words, values = _json_figures({"cost": {"total": 42.67, "note": "run of 72.9 min"}})
    assert _held("42.67", words, values) and _held("42.7", words, values) and _held("72.9", words, values)
    assert not _held("14.2", words, values) and not _held("20.4", words, values)


def test_the_sandbox_domain_is_described_by_the_alb_the_program_records(tmp_path):
    out = tmp_path / "dev"
    offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", out)
    data = json.loads((out / "plan.json").read_text())
    (alb,) = [r for r in data["resources"] if r["type"] == "alicloud:alb/loadBalancer:LoadBalancer"]
    assert alb["inputs"]["addressType"] == "Intranet"
    md = (out / "plan.md").read_text()
    assert "internet ALB" not in md
    assert "reachable from the VPC only (intranet ALB)" in data["sections"]["cloud"]["rows"]["sandbox domain"]
    assert data["sections"]["security"]["exposure"]["E2B API (sandbox.domain)"].startswith("VPC only (intranet ALB)")


def test_plan_writes_the_picture_and_the_full_graph_beside_plan_md_instead_of_the_graph_inside_it(tmp_path):
    out = tmp_path / "dev"
    offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", out)
    md = (out / "plan.md").read_text()
    assert "flowchart" not in md and "```mermaid\ngantt" in md and "```mermaid\npie" in md
    assert (out / "plan.svg").read_text().startswith("<svg ")
    graph = (out / "dependencies.mmd").read_text()
    nodes = re.findall(r"^  r\d+\(?\[", graph, flags=re.M)
    assert graph.startswith("flowchart LR") and len(nodes) == len(json.loads((out / "plan.json").read_text())["resources"])
