"""The MultiKueue dispatcher (optional, runs on the hub): nominates worker clusters per Kueue Workload in score
order (`status.nominatedClusterNames`), counting its own recent nominations until the scores show them.
Composed over `accelscore.kube` (watches, the status write, the Lease) and the pure core `accelscore.dispatch`."""
