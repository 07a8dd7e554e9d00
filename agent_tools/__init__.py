"""Code the training job runs inside the cluster: the tools verl's agent loop offers the model."""
