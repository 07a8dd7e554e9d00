"""The verl-ack training image: Dockerfile, pins, and the tag helpers the workflow and program share."""
