"""verl-ack: VeRL GRPO on Alibaba Cloud ACK. Settings, providers, components, exports; nothing else."""

import pulumi
import pulumi_alicloud as alicloud

from components.layout import check_layout, resolve_layout
from components.secrets import read_secrets
from components.settings import PROJECT, SETTINGS_KEY, parse_settings

settings = parse_settings(pulumi.Config(PROJECT).require_object("settings"))
secrets = read_secrets(settings)
layout = resolve_layout(settings)
for finding in check_layout(settings):  # errors already refused the stack in parse_settings
    pulumi.log.warn(f"{finding.field}: {finding.message}")

stack = pulumi.get_stack()
tags = settings.cloud_tags(stack)

# One explicit provider per cloud; stacks disable the default providers, so a resource that forgets its
# provider fails at preview instead of landing in whatever region the environment points at.
alicloud_provider = alicloud.Provider("alicloud", region=settings.region)

pulumi.export("settings_key", SETTINGS_KEY)
pulumi.export("layout", layout.as_dict())
