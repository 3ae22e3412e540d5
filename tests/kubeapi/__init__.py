"""An in-process Kubernetes API test server the official client talks to over real HTTP, plus pytest fixtures.

Scope (issue 27 item 4; docs/testing.md has the table per feature). It is here for what a real apiserver cannot do
on cue, in `make test`'s seconds, with no cluster:
- a request that fails at a chosen moment (`inject`: any HTTP status, e.g. a 409 conflict or a 503), a slow answer
  (`delay`, once or for every request), a stalled or cut watch (`stall_watches`, `drop_watches`), history
  compacted so a watch or a continue token gets 410 Gone (`compact`), a revoked token (`revoke_api_token`);
- TokenReview of tokens a test mints for pods on chosen nodes (`add_token`), and the service-account issuer that
  signs them (`issuer`);
- the request log (`requests`), to count calls and writes;
- around those, the plain semantics the product's own calls need: CRUD with one global resourceVersion, 409 on a
  stale write, status subresources, `=`/`!=` selectors, paged lists, watches with bookmarks and selector moves,
  graceful pod deletion, merge patch, discovery. Every served kind is storage only.

Not here, because a real apiserver does it and `make e2e-realapi` tests it there (marker `realapi`): validation
of any kind (schemas, ObjectMeta, a Lease's MicroTimes, field labels beyond the product's), defaulting and pruning,
RBAC and impersonation, admission policies, namespace finalization, DELETECOLLECTION, dryRun, JSON patch, set-based
selectors, DRA validation. What it cannot do it refuses (impersonation and dryRun 400, other patches 415, other
selectors 400), so a test that needs it fails here rather than passing against an imitation.
"""

from accelscore.crds import ocm_crd_paths as ocm_crd_files  # the real OCM CRDs a hub serves (vendored)
from tests.kubeapi.fixtures import ApiHandle, unique
from tests.kubeapi.server import KubeApiServer

__all__ = ["ApiHandle", "KubeApiServer", "ocm_crd_files", "unique"]
