"""hub: both score objects in the cluster's namespace, in range, with validUntil, written by the addon's own
certificate (the hub's audit log names the user); every shipped example Placement decided by the real placement
controller as `accelscore simulate`'s placement emulation predicts for the same scores; the addon identity refused
on another cluster's and on another addon's scores."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from functools import partial
from typing import Any

import yaml

from accelscore.simulator import placement as emulation
from e2e.checks.install import ADDON_NS, install_addon
from e2e.checks.log import Checker
from e2e.rig import lifecycle
from e2e.rig.config import AGENTLESS_CLUSTER, MANAGED_CLUSTER, REPO
from e2e.rig.kube import Kubectl, condition, write_kubeconfig

APS = ("accelscore", "resource-usage-score")
RANGES = {"accelscore": (0, 100), "resource-usage-score": (-100, 100)}
ADDON_USER = f"system:open-cluster-management:cluster:{MANAGED_CLUSTER}:addon:accelscore:agent:"
EXAMPLES = REPO / "deploy" / "examples"


def aps(k: Kubectl, cluster: str, name: str) -> dict[str, Any] | None:
    obj: dict[str, Any] | None = k.get("addonplacementscores", name, cluster)
    return obj


def valid_until(obj: dict[str, Any] | None) -> float | None:
    text = ((obj or {}).get("status") or {}).get("validUntil")
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None


def scores_of(obj: dict[str, Any] | None) -> dict[str, int]:
    return {s["name"]: int(s["value"]) for s in ((obj or {}).get("status") or {}).get("scores") or []}


def writers(c: Checker, cluster: str, name: str) -> list[str]:
    """Users whose writes of APS `cluster/name` (status included) the hub's audit log records as succeeded."""
    users = []
    for line in lifecycle.hub(c.cfg).audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef", {})
        if ref.get("namespace") == cluster and ref.get("name") == name and \
                event.get("responseStatus", {}).get("code", 0) < 300:
            users.append(event["user"]["username"])
    return sorted(set(users))


def published(c: Checker) -> None:
    for name in APS:
        obj = c.wait(f"hub: APS {MANAGED_CLUSTER}/{name} with scores", "scores present",
                     partial(aps, c.hub, MANAGED_CLUSTER, name),
                     lambda o: bool(scores_of(o)), 180, every_s=2)
        values = scores_of(obj)
        low, high = RANGES[name]
        bad = {k: v for k, v in values.items() if not low <= v <= high}
        c.check(f"hub: APS {name} values in range", f"{len(values)} scores in {low}..{high}",
                f"{len(values)} scores, out of range {bad}", bool(values) and not bad)
        until = valid_until(obj)
        c.check(f"hub: APS {name} validUntil set, in the future", "> now",
                obj and obj["status"].get("validUntil"), until is not None and until > time.time())
        users = writers(c, MANAGED_CLUSTER, name)
        c.check(f"hub: APS {name} written only by the addon's own certificate (audit log)", f"{ADDON_USER}*",
                users, bool(users) and all(u.startswith(ADDON_USER) for u in users))


def addon_kubectl(c: Checker) -> Kubectl:
    """The scorer's hub identity, from the Secret the real addon CSR filled on the managed cluster."""
    secret = c.managed.get("secret", "accelscore-hub-kubeconfig", ADDON_NS) or {}
    data = {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
    d = c.cfg.state / "addon-identity"
    d.mkdir(parents=True, exist_ok=True)
    (d / "tls.crt").write_bytes(data["tls.crt"])
    (d / "tls.key").write_bytes(data["tls.key"])
    hub = lifecycle.hub(c.cfg)
    path = write_kubeconfig(d / "kubeconfig", server=hub.server, ca=hub.ca.cert, name="accelscore-addon",
                            cert=d / "tls.crt", key=d / "tls.key")
    return Kubectl(path, "addon identity", c.cfg.kubectl)


def refused(c: Checker) -> None:
    k = addon_kubectl(c)
    whoami = k.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", check=False).stdout
    c.check("hub: addon identity from the real addon CSR", f"{ADDON_USER}*", whoami, whoami.startswith(ADDON_USER))
    for cluster, name, what in ((AGENTLESS_CLUSTER, "accelscore", "another cluster's scores"),
                                (MANAGED_CLUSTER, "other-addon-score", "another addon's scores")):
        body = {"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
                "metadata": {"name": name, "namespace": cluster}}
        proc = k.run("create", "-f", "-", stdin=json.dumps(body), check=False)
        reason = proc.stderr.strip().split(":", 1)[0] if proc.returncode else "created"
        c.check(f"hub: addon identity refused on {what} ({cluster}/{name})", "refused (Forbidden or Invalid)",
                reason or proc.stderr.strip()[:200], proc.returncode != 0 and (
                    "forbidden" in proc.stderr.lower() or "invalid" in proc.stderr.lower()
                    or "denied" in proc.stderr.lower()))
        c.hub.run("delete", "addonplacementscore", name, "-n", cluster, "--ignore-not-found", check=False)


def cluster_infos(k: Kubectl) -> list[emulation.ClusterInfo]:
    return [emulation.ClusterInfo(name=mc["metadata"]["name"], labels=mc["metadata"].get("labels", {}),
                                  claims={cl["name"]: cl["value"] for cl in mc.get("status", {}).get("clusterClaims",
                                                                                                     []) or []},
                                  available=condition(mc, "ManagedClusterConditionAvailable") or "Unknown")
            for mc in k.items("managedclusters")]


def hub_view(k: Kubectl) -> emulation.HubView:
    view: dict[str, dict[str, emulation.PublishedScores]] = {}
    for obj in k.items("addonplacementscores"):
        view.setdefault(obj["metadata"]["namespace"], {})[obj["metadata"]["name"]] = emulation.PublishedScores(
            scores=scores_of(obj), valid_until=valid_until(obj))
    return view


def decided(k: Kubectl, name: str) -> list[str] | None:
    """The clusters of the Placement's decisions, once it has scheduled (condition PlacementSatisfied set)."""
    placement = k.get("placement", name, "default")
    if condition(placement, "PlacementSatisfied") is None:
        return None
    return sorted(d["clusterName"] for pd in k.items("placementdecisions", "default",
                                                      f"cluster.open-cluster-management.io/placement={name}")
                  for d in (pd.get("status") or {}).get("decisions") or [])


def agentless_live(c: Checker, scores: dict[str, int]) -> None:
    """The agentless cluster takes part in placement: Available (its lease renewed once, as its agent would), its
    `accelscore` score object written by the hub admin with `scores`, valid for an hour, and the shipped
    ManagedClusterSetBinding applied, so a Placement has two clusters to choose from."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    c.hub.run("-n", AGENTLESS_CLUSTER, "patch", "lease", "managed-cluster-lease", "--type=merge",
              "-p", json.dumps({"spec": {"renewTime": now, "leaseDurationSeconds": 600}}), check=False)
    c.hub.run("patch", "managedcluster", AGENTLESS_CLUSTER, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "E2E",
                                    "message": "set by the e2e harness", "lastTransitionTime": now[:19] + "Z"}]}}))
    until = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    c.hub.apply([{"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
                  "metadata": {"name": "accelscore", "namespace": AGENTLESS_CLUSTER}}])
    c.hub.run("-n", AGENTLESS_CLUSTER, "patch", "addonplacementscore", "accelscore", "--subresource=status",
              "--type=merge", "-p", json.dumps({"status": {"validUntil": until, "scores": [
                  {"name": n, "value": v} for n, v in sorted(scores.items())]}}))
    c.hub.run("apply", "-f", str(EXAMPLES / "clustersetbinding.yaml"))


def example(name: str) -> dict[str, Any]:
    """The shipped example Placement `name` (deploy/examples)."""
    found = [d for d in example_docs() if d["metadata"]["name"] == name]
    if len(found) != 1:
        raise KeyError(f"{len(found)} shipped example Placements named {name}")
    return found[0]


def example_docs() -> list[dict[str, Any]]:
    files = [p for p in sorted(EXAMPLES.glob("*.yaml")) if p.name not in ("kustomization.yaml",
                                                                           "clustersetbinding.yaml")]
    return [d for p in files for d in yaml.safe_load_all(p.read_text()) if d and d.get("kind") == "Placement"]


def example_placements(c: Checker) -> None:
    """The shipped examples (deploy/examples, Kueue's excepted), each decided by the real placement controller."""
    real = scores_of(aps(c.hub, MANAGED_CLUSTER, "accelscore"))
    # a little better than the real cluster on every other score, a little worse on the rest: the examples split
    agentless_live(c, {name: min(100, value + 7) if i % 2 == 0 else max(0, value - 7)
                       for i, (name, value) in enumerate(sorted(real.items()))})
    placements = example_docs()
    for doc in placements:
        c.hub.apply([doc])
    try:
        for doc in placements:
            name = doc["metadata"]["name"]
            seen = c.wait(f"hub: Placement {name} decided", "decisions", partial(decided, c.hub, name),
                          lambda d: d is not None, 60)
            ranking = emulation.rank(emulation.from_object(doc), cluster_infos(c.hub), hub_view(c.hub),
                                     now=time.time())
            c.equal(f"hub: Placement {name}: real placement controller vs accelscore simulate",
                    sorted(ranking.selected), seen)
    finally:
        for doc in placements:
            c.hub.run("delete", "placement", doc["metadata"]["name"], "-n", "default", "--ignore-not-found",
                      check=False)


def run(c: Checker) -> None:
    install_addon(c)
    published(c)
    refused(c)
    example_placements(c)
