"""User-defined scores: CEL definitions (cel-expr-python), the mounted ConfigMap's file (`scores_file`), and PromQL
inputs."""
