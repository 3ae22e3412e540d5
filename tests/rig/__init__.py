"""One test rig: Kubernetes API test servers for a managed cluster and a hub, real scorers (in-process or a
process), agents (in-process over the NVML fake and a real kubelet socket, or an `accelscore agent` process), a
bare ingest server, and readers of what the scorer computed and the hub stored. Every test that needs one of
these builds it here (docs/testing.md, "The test rig")."""
