"""Where the warm sandboxes' code-interpreter image comes from (a mirror in the stack's own registry when it has
one, pinned by digest) and how it gets onto the sandbox nodes before the pool needs it (issue 21 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.cloud.registry import credential_helper_config
from components.config import SettingsError
from components.config.image import VersionSettings
from components.workloads import sandbox as sb
from components.workloads.sandbox.image_pull import SANDBOX_IMAGE_PULL_NAME, sandbox_image_pull_daemonset
from offline.report.latency import is_prepull
from tests.components.workloads.test_sandbox import assert_valid_core, settings
from tests.components.workloads.test_sandbox_hardening import DEDICATED, pss_violations
from tests.conftest import record

DIGEST = "sha256:" + "d" * 64
UPSTREAM = VersionSettings.model_fields["code_interpreter_image"].default
DEV_MIRROR = "verl-ack-dev-registry-vpc.ap-southeast-1.cr.aliyuncs.com/verl-ack/code-interpreter:v1.6"
WORKFLOW = Path(__file__).resolve().parents[3] / ".github" / "workflows" / "image.yml"


def pool_image(s) -> str:
    (box,) = sb.sandbox_pod_template(s)["spec"]["containers"]
    return box["image"]


def pulled_image(s) -> str:
    (pull,) = sandbox_image_pull_daemonset(s)["spec"]["template"]["spec"]["initContainers"]
    return pull["image"]


# --------------------------------------------------------------------------------------------- the mirror
def test_with_an_in_region_registry_the_warm_pool_pulls_the_mirror_there_and_the_digest_pin_stays():
    s = settings("dev", {"versions": {"code_interpreter_image_digest": DIGEST}})
    assert pool_image(s) == f"{DEV_MIRROR}@{DIGEST}"
    assert pulled_image(s) == pool_image(s)


def test_without_a_registry_of_its_own_or_with_the_mirror_off_the_stack_pulls_upstreams_image():
    assert pool_image(settings("multinode", {"image": None})) == UPSTREAM
    assert pool_image(settings("dev", {"sandbox": {"image_mirror": False}})) == UPSTREAM


def test_a_personal_registry_mirrors_under_its_vpc_endpoint_and_namespace():
    s = settings("existing-ecs", {"image": {"source": "built", "registry": "personal"}})
    assert pool_image(s) == "registry-vpc.cn-hangzhou.aliyuncs.com/verl-ack/code-interpreter:v1.6"


def test_requiring_the_mirror_without_a_registry_is_refused_with_the_field_and_the_fix():
    with pytest.raises(SettingsError) as info:
        settings("multinode", {"image": None, "sandbox": {"image_mirror": True}})
    assert any("sandbox.image_mirror" in str(p) and "image.source: built" in str(p) for p in info.value.problems)


def test_the_enterprise_instance_gets_the_mirrors_repository_next_to_the_training_images():
    repos = [r for r in record("dev").resources if r.type == "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo"]
    mirror = [r for r in repos if r.inputs["name"] == "code-interpreter"]
    assert mirror and mirror[0].inputs["tagImmutability"] is True and mirror[0].inputs["repoType"] == "PRIVATE"
    unmirrored = record("dev", {"sandbox": {"image_mirror": False}}).resources
    assert not [r for r in unmirrored if r.type.endswith("RegistryEnterpriseRepo") and
                r.inputs["name"] == "code-interpreter"]


def test_the_credential_helper_serves_the_sandbox_namespace_when_its_pods_pull_the_private_mirror():
    assert credential_helper_config(settings("dev"))["watchNamespace"].split(",") == ["verl", "sandbox-system"]
    off = settings("dev", {"sandbox": {"image_mirror": False}})
    assert credential_helper_config(off)["watchNamespace"] == "verl"


def test_the_image_workflow_mirrors_the_settings_default_as_a_carbon_copy_and_checks_the_digest():
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["mirror-sandbox-image"]
    (copy,) = [st for st in job["steps"] if "run" in st]
    assert UPSTREAM in copy["env"]["SOURCE"]
    assert "imagetools create --prefer-index=false" in copy["run"]
    assert "SANDBOX_IMAGE_DIGEST" in copy["run"] and "exit 1" in copy["run"]
    # The mirror's repository name is upstream's, which the program's mirror reference uses too.
    assert DEV_MIRROR.rsplit("/", 1)[-1] == UPSTREAM.rsplit("/", 1)[-1]


# --------------------------------------------------------------------------------------------- the pull ahead
def test_the_image_pull_meets_restricted_in_every_container_whatever_the_namespace_enforces():
    ds = sandbox_image_pull_daemonset(settings("dev"))
    assert pss_violations(ds["spec"]["template"]["spec"], "restricted") == []
    assert_valid_core(ds, settings("dev").cluster.schema_version)


def test_the_image_pull_runs_where_the_sandboxes_run():
    s = settings("dev", {"sandbox": {"dedicated_pool": DEDICATED}})
    pod = sandbox_image_pull_daemonset(s)["spec"]["template"]["spec"]
    box = sb.sandbox_pod_template(s)["spec"]
    assert pod["nodeSelector"] == box["nodeSelector"] and pod["tolerations"] == box["tolerations"]
    assert sandbox_image_pull_daemonset(s)["metadata"]["namespace"] == s.sandbox.namespace


def test_the_image_pull_is_created_before_the_warm_pool_inside_the_sandboxes_component():
    rec = record("dev")
    (ds,) = [r for r in rec.resources if r.type == "kubernetes:apps/v1:DaemonSet"
             and r.inputs["metadata"]["name"] == SANDBOX_IMAGE_PULL_NAME]
    (pool,) = rec.by_type("kubernetes:agents.kruise.io/v1alpha1:SandboxSet")
    assert ds.urn in pool.dependencies
    assert ds.parent == pool.parent and "Sandboxes" in ds.parent
    # The latency model must not take it for the training image's pre-pull onto the GPU nodes.
    assert not is_prepull(ds)


def test_pulling_ahead_can_be_turned_off():
    rec = record("dev", {"sandbox": {"pull_ahead": False}})
    assert not [r for r in rec.resources if r.type == "kubernetes:apps/v1:DaemonSet"
                and r.inputs["metadata"]["name"] == SANDBOX_IMAGE_PULL_NAME]
