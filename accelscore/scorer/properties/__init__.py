"""ClusterProperty (`about.k8s.io`, REFERENCE §13) from the scorer's figures: `buckets` (pure: names, coarse
buckets with hysteresis, at most one change per property per interval), `writer` (the loop). Off unless
`--cluster-properties` is set (docs/cluster-properties.md)."""

from accelscore.options import Option, boolean, positive_float

OPTIONS = (
    Option("--cluster-properties", "ACCELSCORE_CLUSTER_PROPERTIES", boolean, "false",
           "write coarse about.k8s.io ClusterProperty objects (free GPUs per product, free NVLink domains)"),
    Option("--cluster-property-interval", "ACCELSCORE_CLUSTER_PROPERTY_INTERVAL", positive_float, "300",
           "seconds between two changes of one ClusterProperty at least"),
)
