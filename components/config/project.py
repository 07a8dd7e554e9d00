"""Project-wide names: the Pulumi project, its settings key, where stacks live, and the secret keys.

The secret keys are declared ONCE, here: Pulumi.yaml declares the same keys (a test compares them),
`secrets.Secrets` has one field per key, and the stack schema marks each as `secure`.
"""

from __future__ import annotations

from pathlib import Path

PROJECT = "verl-ack"
SETTINGS_KEY = f"{PROJECT}:settings"
REPO_ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO_ROOT / "stacks"
# Config namespaces other than the project's that a stack file may use: the Pulumi engine's own and the two
# provider packages the program runs on (requirements.txt). Any other namespace is a typo nobody reads.
CONFIG_NAMESPACES = ("pulumi", "alicloud", "kubernetes")

# Secret config keys (`pulumi config set --secret <key> ...`). They never enter the settings object, so
# they cannot leak into a ConfigMap, a label or the plan by accident; the program reads them as secret
# Outputs (`config.get_secret`) and only Kubernetes Secrets carry them into the cluster.
SECRET_KEYS: dict[str, str] = {
    "sandboxApiKey": "Admin API key of the sandbox manager (E2B/MCP). Required when sandbox.enabled.",
    "hfToken": "Hugging Face token for the dataset and model downloads (optional for public repos).",
    "modelscopeToken": "ModelScope token for the model download (optional for public models).",
    "tlsCertificate": "PEM certificate chain for the sandbox domain (when sandbox.tls.source=upload).",
    "tlsPrivateKey": "PEM private key for the sandbox domain (when sandbox.tls.source=upload).",
    "ossAccessKeyId": "Fallback OSS AccessKey id, only when storage.auth=access_key (RRSA is the default).",
    "ossAccessKeySecret": "Fallback OSS AccessKey secret, only when storage.auth=access_key.",
}
