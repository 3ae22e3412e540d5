"""User-defined scores: CEL definitions (cel-expr-python), the mounted ConfigMap source, and PromQL inputs."""
