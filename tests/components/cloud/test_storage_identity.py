"""OSS bucket (private, encrypted, kept) or an existing one, and the RRSA identities: each RAM role trusted for
exactly one service account and allowed only its prefixes; the job Namespace and annotated ServiceAccounts."""

from __future__ import annotations

import json

import pytest

from components.cloud.identity import (
    CSI_FUSE_NAMESPACE,
    CSI_FUSE_SERVICE_ACCOUNT,
    INJECTION_LABEL,
    ROLE_NAME_ANNOTATION,
    oss_policy,
    role_specs,
    trust_policy,
)
from components.cloud.storage import bucket_policy, lifecycle_rules
from components.config import SettingsError
from components.wiring import (
    DATASET_SERVICE_ACCOUNT,
    TRACKING_CLIENT_LABEL,
    TRACKING_SERVICE_ACCOUNT,
    TRAINING_SERVICE_ACCOUNT,
    job_namespace_pod_security,
    pod_security_labels,
    ray_namespace,
)
from components.workloads.training.volumes import csi_url
from tests.components.cloud.test_common import depends_on, json_input, settings_of
from tests.conftest import record

BUCKET = "alicloud:oss/bucket:Bucket"
ROLE = "alicloud:ram/role:Role"
POLICY = "alicloud:ram/policy:Policy"
SA = "kubernetes:core/v1:ServiceAccount"
NAMESPACE = "kubernetes:core/v1:Namespace"
ACCESS_KEY = {"storage": {"auth": "access_key"}}


# ------------------------------------------------------------------------------------------------ bucket
def test_a_new_bucket_is_private_encrypted_versioned_and_blocks_public_access():
    rec = record("dev")
    b = rec.get(BUCKET, "storage-bucket").inputs
    assert b["bucket"] == "verl-ack-dev-data"
    assert b["serverSideEncryptionRule"] == {"sseAlgorithm": "AES256"}
    assert b["versioning"] == {"status": "Enabled"}
    assert "acl" not in b and "policy" not in b
    assert rec.get("alicloud:oss/bucketAcl:BucketAcl", "storage-acl").inputs == {
        "bucket": "verl-ack-dev-data", "acl": "private"}
    assert rec.get("alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock",
                   "storage-public-access-block").inputs == {"bucket": "verl-ack-dev-data", "blockPublicAccess": True}


def test_the_bucket_and_its_guards_are_kept_on_destroy_by_default():
    rec = record("dev")
    for type_, name in [(BUCKET, "storage-bucket"), ("alicloud:oss/bucketAcl:BucketAcl", "storage-acl"),
                        ("alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock", "storage-public-access-block")]:
        reg = rec.get(type_, name)
        assert reg.options["protect"] is True and reg.options["retain_on_delete"] is True, name
    assert rec.get(BUCKET, "storage-bucket").inputs["forceDestroy"] is False


def test_keep_on_destroy_false_is_the_explicit_way_to_delete_the_bucket_with_its_objects():
    reg = record("dev", {"storage": {"keep_on_destroy": False}}).get(BUCKET, "storage-bucket")
    assert reg.options["protect"] is False and reg.options["retain_on_delete"] is False
    assert reg.inputs["forceDestroy"] is True


def test_lifecycle_rules_abort_uploads_expire_scratch_and_old_versions_without_overlapping_actions():
    rules = record("dev").get(BUCKET, "storage-bucket").inputs["lifecycleRules"]
    by_id = {r["id"]: r for r in rules}
    wide = by_id["abort-multipart-and-old-versions"]
    assert wide["prefix"] == "" and wide["abortMultipartUploads"] == [{"days": 3}]
    assert wide["noncurrentVersionExpirations"] == [{"days": 30}]
    assert by_id["expire-scratch"] == {"id": "expire-scratch", "prefix": "scratch/", "enabled": True,
                                       "expirations": [{"days": 7}]}
    assert by_id["expire-access-logs"] == {"id": "expire-access-logs", "prefix": "access-logs/", "enabled": True,
                                           "expirations": [{"days": 90}]}
    actions = ("expirations", "abortMultipartUploads", "noncurrentVersionExpirations")
    for a in rules:
        for b in rules:
            overlap = a is not b and (a["prefix"].startswith(b["prefix"]) or b["prefix"].startswith(a["prefix"]))
            assert not (overlap and {k for k in a if k in actions} & {k for k in b if k in actions}), \
                "OSS refuses overlapping rules with the same action"
    unversioned = lifecycle_rules(settings_of("dev", {"storage": {"versioning": False}}))
    assert "noncurrent_version_expirations" not in unversioned[0]


def test_kms_encryption_names_the_key_and_lets_the_roles_use_it():
    s = settings_of("dev", {"storage": {"sse_algorithm": "KMS", "kms_key_id": "key-abc"}})
    rec = record("dev", {"storage": {"sse_algorithm": "KMS", "kms_key_id": "key-abc"}})
    assert rec.get(BUCKET, "storage-bucket").inputs["serverSideEncryptionRule"] == {
        "sseAlgorithm": "KMS", "kmsMasterKeyId": "key-abc"}
    stmt = oss_policy(s, "b", ("models/",), ())["Statement"][-1]
    assert stmt["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert stmt["Resource"] == ["acs:kms:ap-southeast-1:*:key/key-abc"]


def test_an_existing_bucket_is_used_by_name_and_nothing_is_declared_for_it():
    rec = record("existing-ecs")
    assert not [r for r in rec.resources if r.type.startswith("alicloud:oss/")]
    assert rec.outputs["bucket_name"] == "my-existing-verl-bucket"
    assert rec.outputs["oss_endpoint"] == "oss-cn-hangzhou-internal.aliyuncs.com"


def test_the_access_key_fallback_is_a_secret_in_the_job_namespace():
    rec = record("dev", ACCESS_KEY)
    sec = rec.get("kubernetes:core/v1:Secret", "storage-access-key")
    assert sec.inputs["metadata"] == {"name": "oss-access-key", "namespace": "verl"}
    assert sec.inputs["stringData"] == {"akId": "[secret]", "akSecret": "[secret]"}, \
        "the keys reach the cluster only inside a Secret, every value secret"
    assert depends_on(sec, rec.get("kubernetes:core/v1:Namespace", "identity-namespace"))


# ------------------------------------------------------------------------------------------------ RRSA
def trust(rec, key: str) -> dict:
    return json_input(rec.get(ROLE, f"identity-role-{key}"), "assumeRolePolicyDocument")


def test_each_rrsa_role_trusts_exactly_one_service_account_of_this_cluster():
    rec = record("dev")
    expected = {
        "csi": f"system:serviceaccount:{CSI_FUSE_NAMESPACE}:{CSI_FUSE_SERVICE_ACCOUNT}",
        "data": f"system:serviceaccount:verl:{DATASET_SERVICE_ACCOUNT}",
        "train": f"system:serviceaccount:verl:{TRAINING_SERVICE_ACCOUNT}",
        "mlflow": f"system:serviceaccount:verl:{TRACKING_SERVICE_ACCOUNT}",
    }
    assert {r.name for r in rec.by_type(ROLE)} == {f"identity-role-{k}" for k in expected}
    cluster_id = rec.outputs["cluster_id"]
    for key, subject in expected.items():
        doc = trust(rec, key)
        [stmt] = doc["Statement"]
        assert stmt["Action"] == "sts:AssumeRole" and stmt["Effect"] == "Allow"
        assert stmt["Principal"] == {"Federated": [f"acs:ram::1234567890123456:oidc-provider/ack-rrsa-{cluster_id}"]}
        cond = stmt["Condition"]["StringEquals"]
        assert cond["oidc:sub"] == subject, key
        assert cond["oidc:aud"] == "sts.aliyuncs.com"
        assert cond["oidc:iss"].endswith(cluster_id)
        assert set(stmt["Condition"]) == {"StringEquals"}, "no wildcard subjects"


EXPERIMENT = "checkpoints/gsm8k-tool-agent/qwen2.5-3b-grpo-tool-agent-n16/"


def test_policies_grant_object_access_only_under_each_roles_prefixes():
    rec = record("dev")
    b = "acs:oss:*:*:verl-ack-dev-data"
    want = {  # key: (read prefixes, write prefixes)
        "csi": ({"datasets/", "models/", "checkpoints/", "mlflow/"}, {"checkpoints/", "mlflow/"}),
        "data": ({"datasets/", "models/"}, {"datasets/", "models/"}),
        # Only its own experiment's checkpoints (checkpoints/<project>/<experiment>/).
        "train": ({"datasets/", "models/", EXPERIMENT}, {EXPERIMENT}),
        "mlflow": ({"mlflow/"}, {"mlflow/"}),
    }
    for key, (read, write) in want.items():
        doc = json_input(rec.get(POLICY, f"identity-policy-{key}"), "policyDocument")
        stmts = {tuple(s_["Action"]): s_ for s_ in doc["Statement"]}
        listing = stmts[("oss:ListObjects",)]
        assert listing["Resource"] == [b]
        assert set(listing["Condition"]["StringLike"]["oss:Prefix"]) == (
            {f"{p}*" for p in read | write} | {p.rstrip("/") for p in read | write})
        assert set(stmts[("oss:GetObject",)]["Resource"]) == {f"{b}/{p}*" for p in read}
        writes = [s_ for a, s_ in stmts.items() if "oss:PutObject" in a]
        assert len(writes) == 1 and set(writes[0]["Resource"]) == {f"{b}/{p}*" for p in write}
        for s_ in doc["Statement"]:
            assert "*" not in s_["Action"] and "oss:*" not in s_["Action"]
            assert all(r == b or r.startswith(b + "/") for r in s_["Resource"]), key
        att = rec.get("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment", f"identity-attach-{key}")
        role = rec.get(ROLE, f"identity-role-{key}").inputs["roleName"]
        assert att.inputs["policyType"] == "Custom" and att.inputs["roleName"] == role
        assert att.inputs["policyName"] == f"{role}-oss"


def test_the_job_namespace_enables_pod_identity_injection_and_service_accounts_name_their_roles():
    rec = record("dev")
    ns = rec.get("kubernetes:core/v1:Namespace", "identity-namespace")
    assert ns.inputs["metadata"] == {"name": "verl", "labels": {INJECTION_LABEL: "on", TRACKING_CLIENT_LABEL: "true",
                                                                **pod_security_labels("baseline", settings_of("dev"))}}
    roles = {k: f"verl-dev-ap-southeast-1-{k}" for k in ("data", "train", "mlflow")}
    for key, role in roles.items():
        sa = rec.get(SA, f"identity-sa-{key}")
        assert sa.inputs["metadata"]["annotations"] == {ROLE_NAME_ANNOTATION: role}
        assert sa.inputs["metadata"]["namespace"] == "verl"
        assert depends_on(sa, ns)


def test_the_csi_role_is_handed_to_the_volumes_through_storage_refs():
    specs = {r.key: r for r in role_specs(settings_of("dev"))}
    assert specs["csi"].role_name == "verl-dev-ap-southeast-1-oss-csi"
    assert trust_policy("arn", "iss", specs["csi"].subject)["Statement"][0]["Condition"]["StringEquals"][
        "oidc:sub"] == "system:serviceaccount:ack-csi-fuse:csi-fuse-ossfs"


def test_tracking_off_creates_no_mlflow_role_or_service_account_and_the_csi_role_loses_the_prefix():
    rec = record("dev", {"tracking": {"enabled": False}, "training": {"logger": ["console"]}})
    assert "identity-role-mlflow" not in {r.name for r in rec.by_type(ROLE)}
    assert "identity-sa-mlflow" not in {r.name for r in rec.by_type(SA)}
    assert "mlflow/" not in rec.get(POLICY, "identity-policy-csi").inputs["policyDocument"]


def test_access_key_auth_creates_no_roles_and_no_injection():
    rec = record("dev", ACCESS_KEY)
    assert not rec.by_type(ROLE) and not rec.by_type(POLICY)
    assert rec.get("kubernetes:core/v1:Namespace", "identity-namespace").inputs["metadata"] == {
        "name": "verl", "labels": {**pod_security_labels("baseline", settings_of("dev")), TRACKING_CLIENT_LABEL: "true"}}
    for sa in rec.by_type(SA):
        assert "annotations" not in sa.inputs["metadata"]
    assert "addons-pod-identity" not in {r.name for r in rec.by_type("alicloud:cs/kubernetesAddon:KubernetesAddon")}


def test_role_documents_are_valid_json_with_sorted_keys_so_reruns_do_not_diff():
    rec = record("dev")
    for reg in rec.by_type(POLICY):
        text = reg.inputs["policyDocument"]
        assert text == json.dumps(json.loads(text), sort_keys=True)


def test_every_ram_policy_drops_its_oldest_version_so_the_sixth_change_does_not_fail():
    for stack in ("dev", "existing-ecs"):
        policies = record(stack).by_type(POLICY)
        assert policies
        for reg in policies:
            assert reg.inputs["rotateStrategy"] == "DeleteOldestNonDefaultVersionWhenLimitExceeded", reg.urn


# ------------------------------------------------------------------------------------------------ hardening
def test_the_training_role_cannot_touch_another_experiments_checkpoints():
    doc = json_input(record("dev").get(POLICY, "identity-policy-train"), "policyDocument")
    resources = [r for st in doc["Statement"] for r in st["Resource"]]
    assert "acs:oss:*:*:verl-ack-dev-data/checkpoints/*" not in resources
    other = "acs:oss:*:*:verl-ack-dev-data/checkpoints/gsm8k-tool-agent/another-run/"
    assert not any(other.startswith(r.rstrip("*")) for r in resources if r.endswith("*"))
    assert f"acs:oss:*:*:verl-ack-dev-data/{EXPERIMENT}*" in resources


def test_a_new_bucket_refuses_plain_http_for_everyone():
    rec = record("dev")
    policy = rec.get("alicloud:oss/bucketPolicy:BucketPolicy", "storage-policy")
    assert depends_on(policy, rec.get(BUCKET, "storage-bucket"))
    [deny] = json_input(policy, "policy")["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == ["*"] and deny["Action"] == ["oss:*"]
    assert deny["Condition"] == {"Bool": {"acs:SecureTransport": ["false"]}}
    assert set(deny["Resource"]) == {"acs:oss:*:*:verl-ack-dev-data", "acs:oss:*:*:verl-ack-dev-data/*"}


def test_the_oss_volumes_mount_over_https_when_the_bucket_requires_it():
    s = settings_of("dev")
    assert csi_url(s, "oss-ap-southeast-1-internal.aliyuncs.com") == "https://oss-ap-southeast-1-internal.aliyuncs.com"
    pv = record("dev").get("kubernetes:core/v1:PersistentVolume", "train-checkpoints-pv")
    assert pv.inputs["spec"]["csi"]["volumeAttributes"]["url"].startswith("https://")
    plain = settings_of("dev", {"storage": {"require_https": False}})
    assert csi_url(plain, "oss-ap-southeast-1-internal.aliyuncs.com") == "oss-ap-southeast-1-internal.aliyuncs.com"


def test_vpc_only_also_denies_object_data_from_outside_the_clusters_vpc():
    s = settings_of("dev", {"storage": {"vpc_only": True}})
    https, vpc = bucket_policy(s, "b", "vpc-123")["Statement"]
    assert vpc["Action"] == ["oss:GetObject", "oss:PutObject", "oss:DeleteObject"]
    assert vpc["Condition"] == {"StringNotEquals": {"acs:SourceVpc": ["vpc-123"]}}
    assert vpc["Resource"] == ["acs:oss:*:*:b/*"], "bucket configuration (Pulumi) stays reachable"
    assert bucket_policy(settings_of("dev", {"storage": {"require_https": False}}), "b") is None
    with pytest.raises(SettingsError, match="vpc_only"):
        settings_of("existing-ecs", {"storage": {"vpc_only": True}})


def test_a_new_bucket_logs_its_access_into_itself_and_an_existing_one_is_untouched():
    rec = record("dev")
    log = rec.get("alicloud:oss/bucketLogging:BucketLogging", "storage-logging").inputs
    assert log["targetPrefix"] == "access-logs/"
    assert not record("dev", {"storage": {"access_logging": False}}).by_type("alicloud:oss/bucketLogging:BucketLogging")
    existing = record("existing-ecs")
    assert not existing.by_type("alicloud:oss/bucketLogging:BucketLogging")
    assert not existing.by_type("alicloud:oss/bucketPolicy:BucketPolicy")
    with pytest.raises(SettingsError, match="inside"):
        settings_of("dev", {"storage": {"access_log_prefix": "checkpoints/logs/"}})


def test_the_job_namespace_enforces_baseline_and_only_rdma_ray_pods_get_a_privileged_namespace_of_their_own():
    assert job_namespace_pod_security(settings_of("dev")) == "baseline"
    assert ray_namespace(settings_of("dev")) == "verl"
    assert "identity-ray-namespace" not in {r.name for r in record("dev").by_type(NAMESPACE)}
    multi = settings_of("multinode")
    assert (multi.gpu_pool.kind, multi.gpu_pool.nodes > 1) == ("lingjun", True)
    rec = record("multinode")
    job = rec.get(NAMESPACE, "identity-namespace").inputs["metadata"]
    ray = rec.get(NAMESPACE, "identity-ray-namespace").inputs["metadata"]
    assert (job["name"], ray["name"]) == ("verl", "verl-ray")
    assert job["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ray["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for labels in (job["labels"], ray["labels"]):
        assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
        assert labels[INJECTION_LABEL] == "on"


def test_the_training_role_trusts_the_service_account_of_the_ray_pods_namespace():
    for stack in ("dev", "multinode"):
        rec = record(stack)
        [rayjob] = rec.by_type("kubernetes:ray.io/v1:RayJob")
        ns = rayjob.inputs["metadata"]["namespace"]
        pod = rayjob.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
        sa = rec.get(SA, "identity-sa-train").inputs["metadata"]
        assert (sa["name"], sa["namespace"]) == (pod["serviceAccountName"], ns), stack
        assert depends_on(rec.get(SA, "identity-sa-train"), rec.get(
            NAMESPACE, "identity-ray-namespace" if stack == "multinode" else "identity-namespace"))
        [spec] = [r for r in role_specs(settings_of(stack)) if r.key == "train"]
        assert spec.subject == f"system:serviceaccount:{ns}:{TRAINING_SERVICE_ACCOUNT}"
        trust = json_input(rec.get(ROLE, "identity-role-train"), "assumeRolePolicyDocument")
        assert trust["Statement"][0]["Condition"]["StringEquals"]["oidc:sub"] == spec.subject
    assert record("multinode").get(SA, "identity-sa-data").inputs["metadata"]["namespace"] == "verl"


def test_the_ray_namespace_is_a_setting_only_rdma_stacks_take():
    assert ray_namespace(settings_of("multinode", {"job": {"ray_namespace": "train-rdma"}})) == "train-rdma"
    with pytest.raises(SettingsError, match="job.ray_namespace is only for multi-node Lingjun"):
        settings_of("dev", {"job": {"ray_namespace": "train-rdma"}})
    with pytest.raises(SettingsError, match="is job.namespace"):
        settings_of("multinode", {"job": {"ray_namespace": "verl"}})
    with pytest.raises(SettingsError, match="exceeds the 63"):
        settings_of("multinode", {"job": {"namespace": "n" * 61}})


def test_ram_names_carry_the_region_so_the_same_stack_name_in_two_regions_does_not_collide():
    here = {r.key: r.role_name for r in role_specs(settings_of("dev"))}
    there = {r.key: r.role_name for r in role_specs(settings_of("dev", {"region": "cn-hangzhou",
                                                                         "zones": ["cn-hangzhou-h", "cn-hangzhou-i"],
                                                                         "gpu_pool": {"zone": "cn-hangzhou-h"}}))}
    assert here.keys() == there.keys() and not set(here.values()) & set(there.values())
    legacy = {r.key: r.role_name for r in role_specs(settings_of("dev", {"storage": {"ram_names": "legacy"}}))}
    assert legacy["train"] == "verl-dev-train", "stacks created before the region was added keep their roles"
    rec = record("dev")
    assert rec.get(ROLE, "identity-role-train").inputs["roleName"] == here["train"], "the logical name is unchanged"
