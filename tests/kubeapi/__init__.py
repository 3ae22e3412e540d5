"""An in-process Kubernetes API test server the official client talks to over real HTTP, plus pytest fixtures.

Scope (issue 27 item 4; docs/testing.md "What runs where" has the table per feature). It is here for what a real
apiserver cannot do on cue, in `make test`'s seconds, with no cluster:
- faults at a chosen moment: an HTTP status (`inject`), a slow answer (`delay`, `set_latency`), a stalled or cut
  watch (`stall_watches`, `drop_watches`), history compacted so a watch or a continue token gets 410 Gone
  (`compact`), a revoked token (`revoke_api_token`);
- TokenReview of tokens a test mints for pods on chosen nodes (`add_token`);
- the request log (`requests`), to count calls and writes;
- enough real semantics for the product's own calls around those: CRUD with one global resourceVersion, 409 on a
  stale write, status subresources, field/label selectors, paged lists, watches with bookmarks and selector
  moves, graceful pod deletion, merge patch, discovery; any served kind is storage only, but a Lease's MicroTime
  fields are decoded as the apiserver decodes them (400 otherwise: the product once sent a format a real server
  refuses and this one took).

Not here, because a real apiserver does it and `make e2e` runs those tests there (marker `realapi`): schema and
ObjectMeta validation, defaulting and pruning, RBAC and impersonation, validating admission policies, namespace
finalization, DELETECOLLECTION, dryRun, JSON patch, DRA validation. Impersonation and dryRun are refused with a
400 (never ignored), so a test that needs them fails here rather than passing as the admin.
"""

from tests.kubeapi.fixtures import ApiHandle, ocm_crd_files, unique
from tests.kubeapi.server import KubeApiServer
from tests.kubeapi.state import RequestRecord

__all__ = ["ApiHandle", "KubeApiServer", "RequestRecord", "ocm_crd_files", "unique"]
