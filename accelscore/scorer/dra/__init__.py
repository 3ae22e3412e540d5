"""The scorer's own view of DRA: every node's ResourceSlices and the allocated ResourceClaims (docs/dra.md)."""
