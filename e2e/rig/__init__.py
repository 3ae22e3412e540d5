"""The rig: processes, certificates, kubeconfigs, the hub, the managed cluster and its node."""
