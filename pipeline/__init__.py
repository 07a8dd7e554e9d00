"""Code that runs inside the cluster: the task presets' dataset jobs and the model staging job.

Each module is a plain Python file; the Kubernetes Jobs mount this folder and run
`python -m pipeline.gsm8k`, `python -m pipeline.task_dataset` or `python -m pipeline.stage_model` in a
`python:3.11-slim` pod that pip-installs the pinned packages listed in docs/pipeline.md.
"""
