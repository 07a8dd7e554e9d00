"""The dataset and model staging Jobs and the ConfigMap that ships pipeline/*.py (components/workloads/data.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap

import pytest
import yaml

from components.config import Settings, SettingsError
from components.config.task import HUB, TASK_PRESETS
from components.model import preset_of
from components.model.presets import PRESETS
from components.wiring import (
    PRESET_CONVERTERS,
    StorageRefs,
    dataset_cache_key,
    dataset_files,
    model_cache_key,
    model_path,
    single_turn,
)
from components.workloads import data as dj
from components.workloads.cache import cache_entries, dataset_job_needed, staged_inputs
from offline.engine import run_program
from tests.components.workloads.test_sandbox import assert_valid_core, settings
from tests.conftest import REPO, STACKS, record, stack_settings
from tests.snapshot import assert_snapshot

RRSA = StorageRefs(bucket_name="verl-ack-dev-data", endpoint="oss-ap-southeast-1-internal.aliyuncs.com", auth="rrsa",
                   csi_role_name="verl-dev-oss-csi")
AK = StorageRefs(bucket_name="verl-ack-dev-data", endpoint="oss-ap-southeast-1-internal.aliyuncs.com",
                 auth="access_key", access_key_secret_name="oss-access-key")
SA = "verl-data"
JOB = "kubernetes:batch/v1:Job"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def jobs(s, storage=RRSA, tokens=frozenset(), code=None):
    """The stack's data Jobs: the dataset Job (a preset task's only) and the model staging Job."""
    code = code or dj.pipeline_code()
    dataset = (dj.dataset_job_manifest(s, code, storage, SA, tokens),) if not s.task.dataset.own_files else ()
    return (*dataset, dj.model_job_manifest(s, code, storage, SA, tokens))


def container(job: dict) -> dict:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c


def env(job: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job)["env"]}


def documented_env(module: str) -> set[str]:
    """Variable names in the `Environment:` section of a pipeline module's docstring."""
    doc = (REPO / "pipeline" / f"{module}.py").read_text().split('"""')[1]
    section = doc.split("Environment:", 1)[1]
    return set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", section))


def with_preset(preset: str):
    """Settings with another model preset, without the GPU-layout rules (a 72B model does not fit the dev
    stack's single node, which does not matter to the data Jobs)."""
    return Settings.model_validate(stack_settings("dev", {"model": {"preset": preset}}))


def copy_pipeline(tmp_path):
    target = tmp_path / "pipeline"
    shutil.copytree(REPO / "pipeline", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


# --------------------------------------------------------------------------------------------- code and names
def test_configmap_carries_every_pipeline_file_and_is_named_by_their_digest():
    code = dj.pipeline_code()
    cm = dj.code_configmap_manifest(settings(), code)
    on_disk = {p.name: p.read_text() for p in [*(REPO / "pipeline").glob("*.py"),
                                               *(REPO / "pipeline" / "locks").glob("*.lock")]}
    assert cm["data"] == on_disk
    assert {"__init__.py", "gsm8k.py", "stage_model.py"} <= set(cm["data"])
    assert cm["metadata"]["name"] == f"verl-pipeline-{code.digest[:10]}"
    assert cm["immutable"] is True


def test_changing_a_pipeline_file_renames_the_configmap_and_both_jobs(tmp_path):
    s = settings()
    before = dj.pipeline_code(copy_pipeline(tmp_path))
    gsm8k = tmp_path / "pipeline" / "gsm8k.py"
    gsm8k.write_text(gsm8k.read_text() + "\n# a change\n")
    after = dj.pipeline_code(tmp_path / "pipeline")
    assert dj.code_configmap_name(before) != dj.code_configmap_name(after)
    for old, new in zip(jobs(s, code=before), jobs(s, code=after), strict=True):
        assert old["metadata"]["name"] != new["metadata"]["name"]
        volumes = new["spec"]["template"]["spec"]["volumes"]
        assert {"name": "code", "configMap": {"name": dj.code_configmap_name(after), "defaultMode": 0o444}} in volumes


def test_adding_a_pipeline_file_also_changes_the_digest(tmp_path):
    before = dj.pipeline_code(copy_pipeline(tmp_path))
    (tmp_path / "pipeline" / "extra.py").write_text("X = 1\n")
    assert dj.pipeline_code(tmp_path / "pipeline").digest != before.digest


def test_same_code_and_settings_give_the_same_names():
    s = settings()
    assert [j["metadata"]["name"] for j in jobs(s)] == [j["metadata"]["name"] for j in jobs(settings())]


def test_a_settings_change_renames_only_the_job_that_uses_it():
    s, t = settings(), settings("dev", {"dataset": {"train_subset": 40}})
    (d1, m1), (d2, m2) = jobs(s), jobs(t)
    assert d1["metadata"]["name"] != d2["metadata"]["name"]
    assert m1["metadata"]["name"] == m2["metadata"]["name"]


def test_the_bucket_output_does_not_enter_the_job_name():
    s = settings()
    other = StorageRefs(bucket_name=object(), endpoint=RRSA.endpoint, auth="rrsa", csi_role_name="r")
    assert [j["metadata"]["name"] for j in jobs(s)] == [j["metadata"]["name"] for j in jobs(s, storage=other)]


def test_a_pipeline_folder_without_init_is_refused(tmp_path):
    (tmp_path / "gsm8k.py").write_text("pass\n")
    with pytest.raises(FileNotFoundError, match="__init__.py"):
        dj.pipeline_code(tmp_path)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_job_names_are_dns_labels_of_at_most_63_characters(preset):
    s = with_preset(preset)
    for job in jobs(s):
        name = job["metadata"]["name"]
        assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name


# --------------------------------------------------------------------------------------------- env interface
def test_dataset_job_env_follows_the_gsm8k_module_interface():
    s = settings()
    e = env(jobs(s)[0])
    assert e["DATASET_NAME"] == "openai/gsm8k" and e["DATASET_CONFIG"] == "main"
    assert e["OSS_BUCKET"] == RRSA.bucket_name and e["OSS_REGION"] == s.region
    assert e["OSS_ENDPOINT"] == RRSA.endpoint
    assert e["OSS_PREFIX"] == dataset_files(s).prefix == f"datasets/gsm8k/{dataset_cache_key(s)}/"
    assert e["SUBSETS"] == "train:20,test:100"
    interface = {k for k in e if k.startswith(("OSS_", "DATASET_", "HF_TOKEN", "SUBSETS", "OUTPUT_DIR"))}
    assert interface <= documented_env("gsm8k")


PRESET_JOBS = {  # preset -> (module, DATASET_NAME, Job name prefix, AGENT_NAME by default)
    "gsm8k": ("pipeline.gsm8k", "openai/gsm8k", "gsm8k-", "tool_agent"),
    "math": ("pipeline.task_dataset", "DigitalLearningGmbH/MATH-lighteval", "math-lighteval-", "single_turn_agent"),
    "code": ("pipeline.task_dataset", "PRIME-RL/Eurus-2-RL-Data", "eurus-2-rl-data-", "single_turn_agent"),
}


def preset_settings(preset: str, tools=None):
    task: dict = {"dataset": {"preset": preset}}
    if tools is not None:
        task["tools"] = tools
    return settings("dev", {"task": task})


@pytest.mark.parametrize("preset", sorted(PRESET_JOBS))
def test_each_presets_dataset_job_runs_its_converter_named_by_its_dataset(preset):
    module, hub_id, prefix, agent = PRESET_JOBS[preset]
    s = preset_settings(preset)
    job = jobs(s)[0]
    assert job["metadata"]["name"].startswith(prefix)
    assert container(job)["command"][-1].endswith(f"exec python -m {module}")
    e = env(job)
    assert e["DATASET_NAME"] == hub_id and e["AGENT_NAME"] == agent
    assert e.get("DATASET_CONFIG") == s.task.preset.config, "a dataset without a config gets no DATASET_CONFIG"
    assert e["OSS_PREFIX"] == dataset_files(s).prefix
    interface = {k for k in e if k.startswith(("OSS_", "DATASET_", "HF_TOKEN", "SUBSETS", "OUTPUT_DIR", "AGENT_"))}
    assert interface <= documented_env(module.split(".")[1])


@pytest.mark.parametrize("preset", sorted(PRESET_JOBS))
def test_the_rows_name_single_turn_exactly_when_the_task_has_no_tools(preset):
    a_tool = ["answer"] if preset == "gsm8k" else ["code"]  # the answer tool reads GSM8K's `#### <answer>` only
    for tools in ([], a_tool, None):
        s = preset_settings(preset, tools)
        expected = "single_turn_agent" if single_turn(s) else "tool_agent"
        assert env(jobs(s)[0])["AGENT_NAME"] == expected, tools
    tool_rows, single_rows = preset_settings(preset, a_tool), preset_settings(preset, [])
    assert dataset_files(tool_rows).prefix != dataset_files(single_rows).prefix, \
        "rows of another agent loop are staged under another prefix"


def test_the_agent_loops_the_job_names_are_the_ones_the_pipeline_accepts():
    from components.workloads.training.verl_config import TOOL_AGENT_NAME
    from pipeline.rows import AGENT_NAMES, SINGLE_TURN_AGENT, TOOL_AGENT

    assert (dj.SINGLE_TURN_AGENT, TOOL_AGENT_NAME) == (SINGLE_TURN_AGENT, TOOL_AGENT)
    assert {env(jobs(preset_settings(p, t))[0])["AGENT_NAME"] for p, tool in (("gsm8k", "answer"), ("math", "code"))
            for t in ([], [tool])} \
        == set(AGENT_NAMES)


def test_the_jobs_hub_dataset_and_splits_are_the_presets():
    from pipeline.task_dataset import DATASETS

    for preset, (module, hub_id, _, _) in PRESET_JOBS.items():
        p = TASK_PRESETS[preset]
        assert p.hub_id == hub_id
        assert PRESET_CONVERTERS[preset] == module.split(".")[1]
        if module == "pipeline.task_dataset":
            assert DATASETS[hub_id].splits == {"train": p.train_split, "test": p.val_split}


OWN = {"task": {"dataset": {"train": "oss://verl-ack-dev-data/datasets/own/train.parquet",
                            "val": "oss://verl-ack-dev-data/datasets/own/val.parquet", "train_rows": 100}}}


def test_a_task_on_its_own_files_has_no_dataset_job_and_no_dataset_cache_entry():
    s = settings("dev", OWN)
    assert not dataset_job_needed(s)
    assert all(dataset_job_needed(preset_settings(p)) for p in PRESET_JOBS)
    assert staged_inputs(s) == ("model",) and staged_inputs(settings()) == ("model", "dataset")
    assert set(cache_entries(s, None)) == {"model"}
    with pytest.raises(ValueError, match="your own files; no dataset Job"):
        dj.dataset_job_manifest(s, dj.pipeline_code(), RRSA, SA)


def test_subset_files_the_job_writes_are_the_ones_the_trainer_reads():
    s = settings()
    subsets = env(jobs(s)[0])["SUBSETS"]
    written = {f"{dataset_files(s).prefix}{split}{n}.parquet" for split, n in
               (item.split(":") for item in subsets.split(","))}
    assert {dataset_files(s).train, dataset_files(s).test} <= written


@pytest.mark.parametrize("source,token_var", [("huggingface", "HF_TOKEN"), ("modelscope", "MODELSCOPE_TOKEN")])
def test_model_job_env_follows_the_stage_model_interface(source, token_var):
    s = settings("dev", {"model": {"source": source}})
    e = env(jobs(s, tokens=frozenset({"hf", "modelscope"}))[1])
    assert e["MODEL_SOURCE"] == source
    assert e["MODEL_ID"] == (preset_of(s).hf_id if source == "huggingface" else preset_of(s).modelscope_id)
    assert e["OSS_PREFIX"] == model_path(s) == f"models/Qwen2.5-3B-Instruct/{model_cache_key(s)}/"
    assert "MODEL_REVISION" not in e  # the hub's default branch
    pinned = settings("dev", {"model": {"source": source, "revision": "a09a354"}})
    assert env(jobs(pinned, tokens=frozenset({"hf", "modelscope"}))[1])["MODEL_REVISION"] == "a09a354"
    assert e[token_var]["secretKeyRef"]["name"] == dj.HUB_TOKENS_SECRET
    other = {"HF_TOKEN", "MODELSCOPE_TOKEN"} - {token_var}
    assert not other & set(e)
    interface = {k for k in e if k.startswith(("OSS_", "MODEL_", "DOWNLOAD_DIR", "HF_TOKEN", "MODELSCOPE_TOKEN"))}
    assert interface <= documented_env("stage_model") | documented_env("gsm8k")


def test_hub_tokens_are_referenced_only_when_set():
    s = settings()
    for job in jobs(s, tokens=frozenset()):
        assert "HF_TOKEN" not in env(job) and "MODELSCOPE_TOKEN" not in env(job)
    assert env(jobs(s, tokens=frozenset({"hf"}))[0])["HF_TOKEN"] == {
        "secretKeyRef": {"name": "verl-hub-tokens", "key": "hf-token"}}


def test_access_keys_come_from_the_storage_secret_only_for_the_access_key_fallback():
    s = settings("dev", {"storage": {"auth": "access_key"}})
    for job in jobs(s, storage=AK):
        e = env(job)
        assert e["OSS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "oss-access-key", "key": "akId"}}
        assert e["OSS_ACCESS_KEY_SECRET"] == {"secretKeyRef": {"name": "oss-access-key", "key": "akSecret"}}
    for job in jobs(settings()):
        assert not any(k.startswith("OSS_ACCESS_KEY") for k in env(job))


def test_access_key_auth_without_a_secret_name_is_an_error():
    s = settings("dev", {"storage": {"auth": "access_key"}})
    with pytest.raises(ValueError, match="access-key Secret"):
        jobs(s, storage=StorageRefs(bucket_name="b", endpoint="e", auth="access_key"))


# --------------------------------------------------------------------------------------------- Job spec
def test_jobs_run_once_on_the_system_pool_as_the_rrsa_account_from_their_hash_lock():
    s = settings()
    wanted = ("dataset", "model-huggingface")
    for job, lock in zip(jobs(s), wanted, strict=True):
        spec = job["spec"]
        pod = spec["template"]["spec"]
        assert spec["backoffLimit"] == 2
        assert spec["activeDeadlineSeconds"] == 7200
        assert pod["restartPolicy"] == "Never"
        assert pod["serviceAccountName"] == SA
        assert pod["nodeSelector"] == {"verl-ack/pool": "system"}
        c = container(job)
        assert c["resources"]["requests"]["cpu"] == c["resources"]["limits"]["cpu"] == s.dataset.job_cpu
        assert c["resources"]["requests"]["memory"] == s.dataset.job_memory
        script = c["command"][2]
        install = next(line for line in script.splitlines() if "pip install" in line)
        # only the Job's lock, every file checked against it, nothing it does not pin, nothing built in the pod
        assert install.endswith(f" -r {dj.CODE_ROOT}/pipeline/{lock}.lock")
        for flag in ("--require-hashes", "--no-deps", "--only-binary :all:"):
            assert flag in install
        assert "==" not in install
        assert f"{lock}.lock" in dj.pipeline_code().files  # mounted with the code
        assert c["image"] == s.versions.dataset_image


def test_jobs_run_unprivileged_with_a_read_only_root_filesystem():
    for job in jobs(settings()):
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        sc = container(job)["securityContext"]
        assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}


def test_the_job_script_is_valid_shell_and_installs_before_it_runs_the_module():
    s = settings("dev", {"versions": {"pip_index_url": "https://mirrors.aliyun.com/pypi/simple/"}})
    for job, module in zip(jobs(s), ("pipeline.gsm8k", "pipeline.stage_model"), strict=True):
        script = container(job)["command"][2]
        subprocess.run(["sh", "-n", "-c", script], check=True)
        assert script.index("pip install") < script.index(f"exec python -m {module}")
        assert "--index-url https://mirrors.aliyun.com/pypi/simple/" in script
        assert f"--target {dj.SITE}" in script
        e = env(job)
        assert e["PYTHONPATH"] == f"{dj.SITE}:{dj.CODE_ROOT}"
        mounts = {m["name"]: m["mountPath"] for m in container(job)["volumeMounts"]}
        assert mounts["code"] == f"{dj.CODE_ROOT}/pipeline"


@pytest.mark.parametrize("preset,at_least", [("qwen2.5-0.5b-instruct", 20), ("qwen2.5-7b-instruct", 20),
                                             ("qwen2.5-72b-instruct", 145)])
def test_model_scratch_disk_holds_the_bf16_weights(preset, at_least):
    s = with_preset(preset)
    gib = dj.scratch_disk_gib(s)
    assert gib >= max(at_least, preset_of(s).arch.params * 2 / 2**30)
    scratch = next(v for v in jobs(s)[1]["spec"]["template"]["spec"]["volumes"] if v["name"] == "scratch")
    claim = scratch["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == f"{gib}Gi"
    assert claim["storageClassName"] == s.dataset.staging_storage_class


@pytest.mark.parametrize("stack", STACKS)
def test_every_data_object_validates_strictly(stack):
    s = settings(stack)
    code = dj.pipeline_code()
    for obj in (dj.code_configmap_manifest(s, code), dj.hub_tokens_secret_manifest(s),
                *jobs(s, tokens=frozenset({"hf", "modelscope"}), code=code), *jobs(s, storage=AK, code=code)):
        assert_valid_core(obj, s.cluster.schema_version)


def test_dev_data_jobs_match_their_snapshot():
    # Digests are masked: a pipeline edit renames the Jobs (tested above) but should not churn the snapshot.
    code = dj.pipeline_code()
    text = yaml.safe_dump_all(list(jobs(settings(), tokens=frozenset({"hf"}), code=code)), sort_keys=False)
    text = text.replace(code.short, "<code-digest>")
    masked = [yaml.safe_load(d) for d in re.sub(r"-[0-9a-f]{10}\n", "-<job-digest>\n", text).split("---\n")]
    assert_snapshot("dev.data-jobs.yaml", masked)


# --------------------------------------------------------------------------------------------- component
def test_recorded_jobs_wait_for_their_code_namespace_identity_webhook_and_csi():
    rec = record("dev")
    cm = rec.get(CONFIGMAP, "data-code")
    ns = rec.get("kubernetes:core/v1:Namespace", "identity-namespace")
    sa = rec.get("kubernetes:core/v1:ServiceAccount", "identity-sa-data")
    addons = {r.name: r.urn for r in rec.by_type("alicloud:cs/kubernetesAddon:KubernetesAddon")}
    for name in ("data-dataset", "data-model"):
        job = rec.get(JOB, name)
        deps = set(job.dependencies)
        assert {cm.urn, ns.urn, sa.urn} <= deps, name
        assert any("pod-identity" in n and urn in deps for n, urn in addons.items()), name
        assert job.options["custom_timeouts"]["create"] == f"{7200 // 60 + 5}m"


def test_recorded_jobs_are_named_by_the_pure_functions_and_mount_the_recorded_configmap():
    rec = record("dev")
    cm_name = rec.get(CONFIGMAP, "data-code").inputs["metadata"]["name"]
    assert cm_name == dj.code_configmap_name(dj.pipeline_code())
    for name in ("data-dataset", "data-model"):
        pod = rec.get(JOB, name).inputs["spec"]["template"]["spec"]
        assert {"name": "code", "configMap": {"name": cm_name, "defaultMode": 0o444}} in pod["volumes"]


def test_hub_tokens_reach_the_cluster_only_in_a_secret():
    rec = record("dev")
    secret = rec.get("kubernetes:core/v1:Secret", "data-hub-tokens")
    assert "[secret]" in repr(secret.inputs["stringData"])
    for name in ("data-dataset", "data-model"):
        assert "offline-placeholder" not in repr(rec.get(JOB, name).inputs)


def _data_jobs_program(tmp_path, overrides: dict):
    """The DataJobs component alone under the mock engine, for dev with `overrides`; `ready` exported."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(f"""
        import pulumi
        import pulumi_kubernetes as k8s
        from components.config import Settings
        from components.workloads.data import DataArgs, DataJobs
        from components.wiring import ClusterRefs, StorageRefs, WorkloadIdentity
        from tests.conftest import stack_settings

        s = Settings.model_validate(stack_settings("dev", {overrides!r}))
        provider = k8s.Provider("k8s", kubeconfig="fake")
        data = DataJobs("data", DataArgs(
            settings=s, cluster=ClusterRefs("c-fake", provider),
            storage=StorageRefs("verl-ack-dev-data", "oss-ap-southeast-1-internal.aliyuncs.com", "rrsa", "role"),
            identity=WorkloadIdentity("verl")))
        pulumi.export("ready", [r.urn for r in data.ready])
    """))
    return run_program(program, {}, [], project="verl-ack", stack="unit")


def test_data_ready_lists_both_jobs_for_the_rayjob_to_depend_on(tmp_path):
    rec = _data_jobs_program(tmp_path, {})
    jobs_ = {r.urn: r.name for r in rec.by_type(JOB)}
    assert sorted(jobs_[u] for u in rec.outputs["ready"]) == ["data-dataset", "data-model"]
    # Without tokens no Secret is made and no Job references one.
    assert rec.by_type("kubernetes:core/v1:Secret") == []


def test_a_stack_on_its_own_files_creates_only_the_model_job(tmp_path):
    rec = _data_jobs_program(tmp_path, OWN)
    assert [r.name for r in rec.by_type(JOB)] == ["data-model"]
    assert [u.rsplit("::", 1)[1] for u in rec.outputs["ready"]] == ["data-model"]


# --------------------------------------------------------------------------------------------- bad input
BAD = [
    ({"task": {"dataset": {"preset": "geometry3k"}}}, "task.dataset.preset", "'gsm8k', 'math' or 'code'"),
    ({"dataset": {"train_subset": 8000}}, "dataset", "exceeds the 7473 rows"),
    ({"versions": {"pipeline_packages": {"datasets": ">=5"}}}, "versions.pipeline_packages", "lacks"),
    ({"versions": {"pipeline_packages": {"datasets": ">=5", "pyarrow": "26.0.1", "alibabacloud-oss-v2": "1.4.1",
                                         "alibabacloud-credentials": "1.0.12", "huggingface-hub": "2.4.0",
                                         "modelscope": "1.40.2"}}}, "versions.pipeline_packages", "exact version"),
    ({"versions": {"pip_index_url": "http://mirror.example/simple"}}, "versions.pip_index_url", "https://"),
    ({"dataset": {"job_memory": "8GB"}}, "dataset.job_memory", "memory quantity"),
]


@pytest.mark.parametrize("overrides,field,text", BAD, ids=[str(b[0])[:60] for b in BAD])
def test_bad_data_settings_are_refused_naming_the_field(overrides, field, text):
    with pytest.raises(SettingsError) as info:
        settings("dev", overrides)
    found = [str(p) for p in info.value.problems]
    assert any(p.startswith(field) and text in p for p in found), found


def test_settings_accept_exactly_the_presets_a_dataset_job_converts():
    for name in TASK_PRESETS:
        assert settings("dev", {"task": {"dataset": {"preset": name}}}).task.dataset.preset_name == name
    # Every declared preset has its converter, and so does a hub dataset converted by the stack's own script.
    assert set(PRESET_CONVERTERS) == {*TASK_PRESETS, HUB}


def test_a_finished_data_job_stays_until_the_stack_deletes_it_so_no_later_preview_shows_drift():
    # A TTL would let Kubernetes delete the Job behind Pulumi: drift, and a re-run on `pulumi up --refresh`.
    for job in jobs(settings()):
        assert "ttlSecondsAfterFinished" not in job["spec"], job["metadata"]["name"]
    for job in jobs(settings("dev", {"dataset": {"ttl_seconds_after_finished": 600}})):
        assert job["spec"]["ttlSecondsAfterFinished"] == 600, "an explicit TTL is still honoured"


@pytest.mark.parametrize("task,module", [({"dataset": {"preset": "math"}}, "pipeline.task_dataset"),
                                         ({"dataset": {"preset": "code"}}, "pipeline.task_dataset"),
                                         (OWN["task"], None)], ids=["math", "code", "own files"])
def test_the_whole_program_deploys_the_dataset_job_of_a_preset_and_none_for_own_files(task, module):
    rec = record("dev", {"task": task})
    (dataset,) = [r for r in rec.by_type(JOB) if r.name == "data-dataset"] or [None]
    if module is None:
        assert dataset is None, "own files are rows already: no Job converts them"
        return
    script = dataset.inputs["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert script.endswith(f"exec python -m {module}")
