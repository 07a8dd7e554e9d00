"""What teardown.py keeps before it destroys a stack: complete verl checkpoints, guarded by a lock."""
