"""Secret config: read only as secret Outputs, required only when the stack's settings need them."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi

from components.config import PROJECT, SECRET_KEYS, Problem, Settings, SettingsError


def field_name(key: str) -> str:
    """`sandboxApiKey` -> `sandbox_api_key`: the Secrets field of a secret config key."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


@dataclass(frozen=True)
class Secrets:
    """One field per key of SECRET_KEYS (a test holds them equal), each a secret Output or None when unset."""

    sandbox_api_key: pulumi.Output[str] | None
    hf_token: pulumi.Output[str] | None
    modelscope_token: pulumi.Output[str] | None
    tls_certificate: pulumi.Output[str] | None
    tls_private_key: pulumi.Output[str] | None
    oss_access_key_id: pulumi.Output[str] | None
    oss_access_key_secret: pulumi.Output[str] | None


def required_secret_keys(s: Settings) -> list[str]:
    keys = []
    if s.sandbox.enabled:
        keys.append("sandboxApiKey")
    if s.sandbox.domain and s.sandbox.tls.source == "upload":
        keys += ["tlsCertificate", "tlsPrivateKey"]
    if s.storage.auth == "access_key":
        keys += ["ossAccessKeyId", "ossAccessKeySecret"]
    return keys


def read_secrets(s: Settings, config: pulumi.Config | None = None) -> Secrets:
    """Secret Outputs for every key that is set; a SettingsError naming each required key that is not."""
    config = config or pulumi.Config(PROJECT)

    def present(key: str) -> bool:
        # Presence only: the value is never logged or compared. Pulumi.yaml declares the keys with an
        # empty default so optional ones may stay unset.
        return bool(pulumi.runtime.get_config(f"{PROJECT}:{key}"))

    missing = [k for k in required_secret_keys(s) if not present(k)]
    # The engine passes the keys stored encrypted (`secure:`) as the run's secret keys
    # (pulumi.runtime.is_config_secret, from the language host's config_secret_keys): a value set without
    # --secret sits in plaintext in the stack file and in every copy of the repository.
    plaintext = [k for k in SECRET_KEYS if present(k) and not pulumi.runtime.is_config_secret(f"{PROJECT}:{k}")]
    problems = [Problem(field=f"{PROJECT}:{k}", message=f"required secret is not set; run `pulumi config set "
                        f"--secret {k} <value>`") for k in missing]
    problems += [Problem(field=f"{PROJECT}:{k}", message="is set in plaintext (not encrypted in the stack file): "
                         f"run `pulumi config set --secret {k} <value>` to store it encrypted, and rotate the value: "
                         "it has been readable by anyone with the file") for k in plaintext]
    if problems:
        raise SettingsError(problems)

    def get(key: str) -> pulumi.Output[str] | None:
        return config.require_secret(key) if present(key) else None

    return Secrets(**{field_name(key): get(key) for key in SECRET_KEYS})
