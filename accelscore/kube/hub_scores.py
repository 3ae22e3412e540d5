"""The one door to the OCM hub: AddOnPlacementScore get/create/status update through the official client.

Credentials come from the hub kubeconfig the addon framework mounts (Secret keys `kubeconfig`, `tls.crt`,
`tls.key`; the certificate rotates). Before each call the kubeconfig and every file it references are
fingerprinted by content, and a change rebuilds the client; a 401 also rebuilds it once and retries
(REFERENCE §2). Status goes through `/status` with the object's resourceVersion (optimistic concurrency):
a 409 re-reads the object and retries a bounded number of times. Library errors leave this module only as
`accelscore.kube.errors` types; `last_operation` says what was tried, for the log line.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, Unpack

import yaml
from kubernetes import client as k8s

from accelscore.crds.placement_score import ScoreObject, ScoreStatus
from accelscore.kube import config as kube_config
from accelscore.kube import errors as kube_errors
from accelscore.kube.config import ApiClient
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions

log = logging.getLogger(__name__)

GROUP = "cluster.open-cluster-management.io"
VERSION = "v1alpha1"
PLURAL = "addonplacementscores"
KIND = "AddOnPlacementScore"
MANAGED_BY = {"app.kubernetes.io/managed-by": "accelscore"}
_FILE_KEYS = ("client-certificate", "client-key", "certificate-authority", "tokenFile")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """How a status write went: the 409s and 401s met on the way, whether it created the object, and any error."""

    conflicts: int = 0  # 409s met (each followed by a re-read)
    reloads: int = 0  # credential reloads after a 401
    created: bool = False
    error: kube_errors.KubeError | None = None  # why the write failed in the end; None = written


def render_object(*, name: str, namespace: str, status: ScoreStatus | None = None) -> ScoreObject:
    """An AddOnPlacementScore as stored on the hub (status only if given)."""
    obj: ScoreObject = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
    }
    if status is not None:
        obj["status"] = status
    return obj


def kubeconfig_fingerprint(path: Path) -> str:
    """A content hash of the kubeconfig and every file it references (certificates, keys, token files)."""
    digest = hashlib.sha256()
    data = path.read_bytes()
    digest.update(data)
    for ref in _referenced_files(data, path.parent):
        digest.update(str(ref).encode())
        try:
            digest.update(ref.read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return digest.hexdigest()


def _referenced_files(data: bytes, base: Path) -> list[Path]:
    try:
        doc = yaml.safe_load(data) or {}
    except yaml.YAMLError:
        return []
    found: list[Path] = []
    for section, key in (("users", "user"), ("clusters", "cluster")):
        for entry in doc.get(section) or ():
            body = (entry or {}).get(key) or {}
            found += [base / body[k] for k in _FILE_KEYS if isinstance(body.get(k), str) and body[k]]
    return found


class HubClient:
    """AddOnPlacementScores in one hub namespace, through a kubeconfig that may rotate under us."""

    def __init__(self, *, kubeconfig: str | Path, namespace: str, request_timeout: tuple[float, float] = (5.0, 15.0),
                 conflict_retries: int = 3) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.namespace = namespace
        self._timeout = request_timeout
        self._conflict_retries = conflict_retries
        self._api_client: k8s.ApiClient | None = None
        self._api: k8s.CustomObjectsApi | None = None
        self._fingerprint: str | None = None
        self._unusable: str | None = None  # a kubeconfig version that failed to load: not retried until it changes
        self._rv: dict[str, str] = {}  # name -> resourceVersion we last saw
        self.loads = 0  # clients built (the first one included)
        self.unauthorized_reloads = 0
        self.last_operation = ""  # what the latest call tried, for error messages

    # ------------------------------------------------------------------ operations

    def get(self, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            obj = self._call(f"get addonplacementscores/{name}", lambda api: _object(api.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name, _request_timeout=self._timeout)))
        except kube_errors.NotFound:
            self._rv.pop(name, None)
            return None
        self._remember(name, obj)
        return obj

    def create(self, name: str) -> dict[str, Any]:
        """Create the object empty (status sent on create would be dropped); returns it."""
        body = render_object(name=name, namespace=self.namespace)
        obj = self._call("create addonplacementscores", lambda api: _object(api.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, dict(body), _request_timeout=self._timeout)))  # a plain dict
        self._remember(name, obj)
        return obj

    def replace_status(self, name: str, status: ScoreStatus, resource_version: str) -> dict[str, Any]:
        """PUT `/status` at `resource_version` (409 if the object moved on since); returns the stored object."""
        body = render_object(name=name, namespace=self.namespace, status=status)
        body["metadata"]["resourceVersion"] = resource_version
        obj = self._call("update addonplacementscores/status", lambda api: _object(
            api.replace_namespaced_custom_object_status(GROUP, VERSION, self.namespace, PLURAL, name, dict(body),
                                                        _request_timeout=self._timeout)))
        self._remember(name, obj)
        return obj

    def load(self) -> None:
        """Build the client now (start-up): KubeconfigInvalid or KubeUnavailable when the kubeconfig cannot be read."""
        self._current_api()

    def server(self) -> str:
        """The hub API server the kubeconfig names (for messages); '' before a client is built."""
        return self._api_client.configuration.host if self._api_client is not None else ""

    def read_status(self, name: str) -> dict[str, Any] | None:
        """The object's status, or None when the object or its status is missing."""
        self._current_api()
        obj = self.get(name)
        return None if obj is None else obj.get("status") or None

    def write_status(self, name: str, status: ScoreStatus) -> WriteOutcome:
        """Make the hub's status of `name` equal `status`: create if missing, re-read on 409 (bounded).

        Hub errors come back in the outcome (`error`), not raised: the caller counts and schedules retries.
        """
        reloads_before, conflicts, created = self.unauthorized_reloads, 0, False
        error: kube_errors.KubeError | None = None
        try:
            self._current_api()
            for _ in range(self._conflict_retries + 1):
                try:
                    rv = self._rv.get(name)
                    if rv is None:
                        if self.get(name) is None:
                            self.create(name)
                            created = True
                        rv = self._rv[name]
                    self.replace_status(name, status, rv)
                    error = None
                    break
                except kube_errors.Conflict as err:  # moved on, or created by someone else meanwhile: read again
                    self._rv.pop(name, None)
                    conflicts, error = conflicts + 1, err
                except kube_errors.NotFound as err:
                    if name not in self._rv:
                        raise  # create failed: the namespace (or the CRD) is missing
                    self._rv.pop(name, None)  # deleted under us: create it again
                    error = err
        except kube_errors.KubeError as err:
            error = err
        return WriteOutcome(conflicts=conflicts, reloads=self.unauthorized_reloads - reloads_before,
                            created=created, error=error)

    def watch_scores(self, *, on_change: OnChange[str, dict[str, Any]], **options: Unpack[WatchOptions]
                     ) -> WatchCache[str, dict[str, Any]]:
        """Our namespace's accelscore score objects (by the managed-by label) as raw JSON keyed by name, on a client
        of the watch's own (the publisher's is busy writing), rebuilt when the kubeconfig changes on disk (checked
        at each list and watch round; a failed round backs off and retries, never raises)."""
        held: dict[str, Any] = {}

        def list_scores(**kwargs: Any) -> Any:
            fingerprint: str | None
            try:
                fingerprint = kubeconfig_fingerprint(self.kubeconfig)
            except OSError:
                fingerprint = held.get("fingerprint")  # mid-rotation: keep what we have
            if "api" not in held or fingerprint != held.get("fingerprint"):
                client = kube_config.from_kubeconfig(self.kubeconfig)
                if "client" in held:
                    held["client"].close()
                held.update(client=client, api=k8s.CustomObjectsApi(client), fingerprint=fingerprint)
            return held["api"].list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, **kwargs)

        return WatchCache(list_func=list_scores, key=_name, raw=True, label_selector=LABEL_SELECTOR,
                          on_change=on_change, name=f"own-scores-{self.namespace}", **options)

    def close(self) -> None:
        """Release the connection pool."""
        if self._api_client is not None:
            self._api_client.close()
        self._api_client = self._api = None

    # ------------------------------------------------------------------ credentials and errors

    def _remember(self, name: str, obj: dict[str, Any]) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv[name] = str(rv)

    def _call(self, operation: str, fn: Callable[[k8s.CustomObjectsApi], T]) -> T:
        """Run one API call; reload credentials if they changed on disk, and once more after a 401."""
        self.last_operation = operation
        api = self._api or self._current_api()
        try:
            return kube_errors.call(fn, api)
        except kube_errors.Unauthorized:
            log.info("hub answered 401 to %s: reloading %s", operation, self.kubeconfig)
            self.unauthorized_reloads += 1
            return kube_errors.call(fn, self._load())

    def _current_api(self) -> k8s.CustomObjectsApi:
        """The client, rebuilt first if the kubeconfig or its files changed on disk (checked once per cycle)."""
        try:
            fingerprint = kubeconfig_fingerprint(self.kubeconfig)
        except OSError:
            fingerprint = None  # unreadable right now (mid-rotation?): keep what we have
        if self._api is not None and fingerprint in (None, self._fingerprint, self._unusable):
            return self._api
        if self._api is not None:
            log.info("hub kubeconfig %s changed on disk: reloading", self.kubeconfig)
        return self._load()

    def _load(self) -> k8s.CustomObjectsApi:
        """Build a fresh client from the kubeconfig; on failure keep the old one, if any."""
        try:
            fingerprint = kubeconfig_fingerprint(self.kubeconfig)
            api_client = kube_config.from_kubeconfig(self.kubeconfig)
        except OSError as err:
            unavailable = kube_errors.KubeUnavailable(f"cannot read hub kubeconfig {self.kubeconfig}: {err}")
            unavailable.__cause__ = err
            return self._keep(unavailable)
        except kube_errors.KubeError as err:
            self._unusable = fingerprint
            return self._keep(err)
        self.close()
        self._api_client = api_client
        self._api = k8s.CustomObjectsApi(api_client)
        self._fingerprint = fingerprint
        self.loads += 1
        return self._api

    def _keep(self, err: kube_errors.KubeError) -> k8s.CustomObjectsApi:
        """After a failed (re)load: the previous client if there is one, else the error."""
        if self._api is None:
            raise err
        log.warning("cannot reload hub kubeconfig %s (%s): keeping the previous credentials", self.kubeconfig, err)
        return self._api


# ------------------------------------------------------------------ every cluster's score objects (hub guard)

LABEL_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())


def watch_all_scores(api_client: ApiClient, *, on_change: OnChange[tuple[str, str], dict[str, Any]] | None = None,
                     **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], dict[str, Any]]:
    """accelscore's AddOnPlacementScores in every namespace (by our managed-by label), as raw JSON, keyed by
    (namespace, name)."""
    api = k8s.CustomObjectsApi(api_client)
    return WatchCache(list_func=functools.partial(api.list_cluster_custom_object, GROUP, VERSION, PLURAL),
                      raw=True, label_selector=LABEL_SELECTOR, on_change=on_change, name="addonplacementscores",
                      **options)


class ScoreObjects:
    """Get and status-replace any namespace's AddOnPlacementScores (resourceVersion preconditions: 409 =
    `Conflict`), for a hub-side process with its own credentials."""

    def __init__(self, api_client: ApiClient, *, request_timeout: tuple[float, float] = (5.0, 15.0)) -> None:
        self._api = k8s.CustomObjectsApi(api_client)
        self._timeout = request_timeout

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _object(kube_errors.call(self._api.get_namespaced_custom_object, GROUP, VERSION, namespace,
                                            PLURAL, name, _request_timeout=self._timeout))
        except kube_errors.NotFound:
            return None

    def replace_status(self, obj: dict[str, Any], status: ScoreStatus) -> dict[str, Any]:
        """PUT `/status` at `obj`'s resourceVersion."""
        meta = obj["metadata"]
        body = render_object(name=meta["name"], namespace=meta["namespace"], status=status)
        body["metadata"]["resourceVersion"] = meta["resourceVersion"]
        return _object(kube_errors.call(self._api.replace_namespaced_custom_object_status, GROUP, VERSION,
                                        meta["namespace"], PLURAL, meta["name"], body, _request_timeout=self._timeout))


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _object(answer: object) -> dict[str, Any]:
    """A custom object as the API answers it: a JSON object (anything else breaks the API's contract)."""
    if not isinstance(answer, dict):
        raise kube_errors.KubeError(f"the API answered a {type(answer).__name__} where an object belongs")
    return answer
