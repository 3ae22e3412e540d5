"""The namespace controller: empties a Terminating namespace, then removes it, as kube-controller-manager's does.

It deletes every namespaced kind's content with DELETECOLLECTION as
`system:serviceaccount:kube-system:namespace-controller`, so each item passes validating admission like on a
real cluster: a policy that refuses it leaves the namespace Terminating with condition
NamespaceDeletionContentFailure (True), retried until it succeeds. The first pass runs inside the DELETE
request (an unblocked namespace is gone when the call returns); retries run on a background thread.
Pods are removed with grace period 0 (no kubelet here to finish a graceful delete).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from tests.kubeapi.errors import ApiError
from tests.kubeapi.identity import UserInfo, service_account_groups
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.store import Store, now_rfc3339

CONTROLLER = UserInfo("system:serviceaccount:kube-system:namespace-controller",
                      (*service_account_groups("kube-system"), "system:authenticated"))
RETRY_S = 0.5


class NamespaceController:
    """Finalizes Terminating namespaces of one store."""

    def __init__(self, store: Store, types: Callable[[], Sequence[ResourceType]]) -> None:
        self._store = store
        self._types = types
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubeapi-namespace-controller", daemon=True)
        self._thread.start()

    def sync(self, name: str) -> None:
        """Try to finalize `name` now; on failure keep retrying in the background."""
        if not self._finalize(name):
            with self._lock:
                self._pending.add(name)
            self._wake.set()

    def _finalize(self, name: str) -> bool:
        ns_type = next(rt for rt in self._types() if rt.kind == "Namespace")
        errors: list[str] = []
        for rt in self._types():
            if not rt.namespaced:
                continue
            options = {"gracePeriodSeconds": 0} if rt.kind == "Pod" else {}
            try:
                self._store.delete_collection(rt, name, lambda _o: True, options, user=CONTROLLER)
            except ApiError as err:
                errors.append(f"{rt.qualified}: {err}")
        if errors:
            self._store.set_namespace_condition(ns_type, name, {
                "type": "NamespaceDeletionContentFailure", "status": "True", "reason": "ContentDeletionFailed",
                "message": "Failed to delete all resource types, 1 remaining: " + "; ".join(errors),
                "lastTransitionTime": now_rfc3339()})
            return False
        self._store.remove_namespace(ns_type, name)
        return True

    def _run(self) -> None:
        while not self._store.closed:
            self._wake.wait(RETRY_S)
            self._wake.clear()
            with self._lock:
                pending = sorted(self._pending)
            for name in pending:
                if self._store.closed:
                    return
                if self._finalize(name):
                    with self._lock:
                        self._pending.discard(name)
