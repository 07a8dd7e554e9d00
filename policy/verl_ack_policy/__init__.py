"""verl-ack policy pack: pure checks (`checks`) and their pulumi_policy wiring (`pack`)."""
