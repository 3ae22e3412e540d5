"""multikueue: real Kueue v0.19.2 on the hub and on two workers (cluster1, and cluster2, an apiserver of its own with
no node: Kueue admits against ClusterQueue quota), the hub's ClusterQueue with only the MultiKueue AdmissionCheck,
Kueue's `multiKueue.dispatcherName` set to `accelscore dispatcher`, which runs as a process with its shipped RBAC.
Each worker's scores come from the real scorer fed by pushed reports (e2e/rig/feed.py), so the check sets them:

- a Job of 2 pods x 4 GPUs, and a Job pinned to a GPU product, each admitted on the cluster the scores rank first;
- a Job that waits while no cluster has room is nominated within 5 s of the score change that makes room;
- a burst of one-node Jobs spread as the ledger says (each cluster gets as many as it has free nodes): with the
  dispatcher's ledger off (`ACCELSCORE_DISPATCH_LEDGER=false` in the environment: the planted defect) they pile
  onto one cluster and this check fails.

The OCM kueue-addon is not served as a Go module: the rig writes what it would (e2e/rig/kueue.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import yaml
from kubernetes import client as k8s

from accelscore.dispatch.table import raw_floor
from accelscore.dispatcher.cli import DISPATCHER_NAME
from accelscore.kube.config import from_kubeconfig
from accelscore.scorer.core.score_table import BY_NAME
from e2e.checks.log import Checker
from e2e.rig import kueue, lifecycle, procs
from e2e.rig.config import AGENTLESS_CLUSTER, MANAGED_CLUSTER, REPO, Config
from e2e.rig.control_plane import ControlPlane
from e2e.rig.feed import ACCELSCORE, Feed
from e2e.rig.kube import Kubectl, condition, write_kubeconfig

NS = "e2e-mk"
QUEUE = "gpu"
CONFIG, CHECK = "accelscore-e2e", "multikueue"
DISPATCHER_NS = "accelscore-hub"
DISPATCHER_YAML = REPO / "deploy" / "addon-template" / "components" / "dispatcher" / "dispatcher.yaml"
H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
QUOTA = {"cpu": "1000", "memory": "4000Gi", "nvidia.com/gpu": "400"}
PAUSE = "registry.k8s.io/pause:3.10.2"
MOVE_WITHIN_S = 5.0
KUEUE_PLANES = ("hub", "managed", AGENTLESS_CLUSTER)


def worker(cfg: Config) -> ControlPlane:
    """The second worker: an apiserver (and etcd) of its own, with no node and no OCM agent."""
    return ControlPlane(cfg, AGENTLESS_CLUSTER, "10.98.0.0/16")


def job(name: str, pods: int, gpus: int, product: str | None = None) -> dict[str, Any]:
    """A Job for Kueue's LocalQueue: `pods` pods of `gpus` whole GPUs (pinned to `product` by nodeSelector)."""
    spec: dict[str, Any] = {
        "hostNetwork": True, "restartPolicy": "Never",
        "containers": [{"name": "main", "image": PAUSE, "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": {"spec": spec}}}


def dispatcher_rbac() -> list[dict[str, Any]]:
    """The dispatcher component's ServiceAccount, roles and bindings as shipped (its Deployment left out)."""
    return [d for d in yaml.safe_load_all(DISPATCHER_YAML.read_text()) if d and d["kind"] != "Deployment"]


class Hub:
    """The hub's Kueue Workloads and score objects read with the Python client (polled every 0.1 s where the check
    times something)."""

    def __init__(self, cfg: Config) -> None:
        self.api = from_kubeconfig(cfg.hub_kubeconfig)
        self.custom = k8s.CustomObjectsApi(self.api)

    def workloads(self) -> dict[str, dict[str, Any]]:
        """The namespace's Workloads by the name of the Job that owns each."""
        out = {}
        listed: Any = self.custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads")
        for wl in listed["items"]:
            for owner in wl["metadata"].get("ownerReferences") or []:
                if owner.get("kind") == "Job":
                    out[owner["name"]] = wl
        return out

    def scores(self, cluster: str) -> dict[str, int]:
        try:
            obj: Any = self.custom.get_namespaced_custom_object(
                "cluster.open-cluster-management.io", "v1alpha1", cluster, "addonplacementscores", "accelscore")
        except k8s.ApiException:
            return {}
        return {s["name"]: int(s["value"]) for s in (obj.get("status") or {}).get("scores") or []}

    def fits(self, cluster: str, name: str) -> int | None:
        """A fit score read back as pods (the least count that publishes it), None while not published."""
        value = self.scores(cluster).get(name)
        ref = BY_NAME[name.split(".")[0]].ref
        return None if value is None else raw_floor(value, ref)


def placed(wl: dict[str, Any] | None) -> tuple[list[str], str]:
    status = (wl or {}).get("status") or {}
    return list(status.get("nominatedClusterNames") or []), str(status.get("clusterName") or "")


def no_workloads(k: Kubectl) -> bool:
    return not k.items("workloads.kueue.x-k8s.io", NS)


def worker_admitted(k: Kubectl, wl_name: str) -> bool:
    return condition(k.get("workloads.kueue.x-k8s.io", wl_name, NS), "Admitted") == "True"


class Rig:
    """Everything the check starts, stopped again by `close` (also when a check fails)."""

    def __init__(self, c: Checker) -> None:
        self.c, self.cfg = c, c.cfg
        self.cluster2 = worker(c.cfg)
        self.planes = {"hub": lifecycle.hub(c.cfg), "managed": lifecycle.managed(c.cfg),
                       AGENTLESS_CLUSTER: self.cluster2}
        self.workers = {MANAGED_CLUSTER: self.planes["managed"].kubectl, AGENTLESS_CLUSTER: self.cluster2.kubectl}
        self.feeds: dict[str, Feed] = {}

    def up(self) -> None:
        c = self.c
        t0 = time.monotonic()
        self.cluster2.start()
        waits = [kueue.start(self.cfg, self.planes[p], dispatcher=DISPATCHER_NAME if p == "hub" else None)
                 for p in KUEUE_PLANES]
        for wait in waits:
            wait()
        c.check("multikueue: Kueue v0.19.2 ready on the hub, cluster1 and cluster2 (webhooks on 127.0.0.1)",
                "3 managers ready", f"{len(KUEUE_PLANES)} ready after {time.monotonic() - t0:.0f} s", True)
        for k in self.workers.values():
            k.apply(kueue.queue_objects(NS, QUEUE, QUOTA))
        hub = c.hub
        hub.apply(kueue.multikueue_objects({MANAGED_CLUSTER: self.planes["managed"].kubeconfig,
                                            AGENTLESS_CLUSTER: self.cluster2.kubeconfig}, CONFIG, CHECK))
        hub.apply(kueue.queue_objects(NS, QUEUE, QUOTA, check=CHECK))
        c.wait("multikueue: MultiKueueClusters Active", {MANAGED_CLUSTER: "True", AGENTLESS_CLUSTER: "True"},
               lambda: {n: condition(hub.get("multikueuecluster", n), "Active") for n in self.workers},
               lambda seen: all(v == "True" for v in seen.values()), 120)
        c.wait(f"multikueue: AdmissionCheck {CHECK} Active", "True",
               lambda: condition(hub.get("admissionchecks.kueue.x-k8s.io", CHECK), "Active"),
               lambda seen: seen == "True", 60)
        self.feeds = {
            MANAGED_CLUSTER: Feed(self.cfg, MANAGED_CLUSTER, self.planes["managed"], product=H100,
                                  model="NVIDIA H100 80GB HBM3", nodes=2),
            AGENTLESS_CLUSTER: Feed(self.cfg, AGENTLESS_CLUSTER, self.cluster2, product=A100,
                                    model="NVIDIA A100-SXM4-80GB", nodes=3)}
        for feed in self.feeds.values():
            feed.start()
        self._dispatcher()

    def _dispatcher(self) -> None:
        """`accelscore dispatcher` as a process with its shipped ServiceAccount and RBAC (the Deployment aside)."""
        hub = self.c.hub
        hub.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DISPATCHER_NS}}, *dispatcher_rbac()])
        token = hub.run("-n", DISPATCHER_NS, "create", "token", "accelscore-dispatcher", "--duration", "2h"
                        ).stdout.strip()
        plane = self.planes["hub"]
        kubeconfig = write_kubeconfig(self.cfg.state / "dispatcher.kubeconfig", server=plane.server,
                                      ca=plane.ca.cert, name="accelscore-dispatcher", token=token)
        port = self.cfg.port("dispatcher-metrics")
        procs.start(self.cfg, "dispatcher", [*ACCELSCORE, "dispatcher"], env={
            "KUBECONFIG": str(kubeconfig), "HUB_KUBECONFIG": "", "POD_NAMESPACE": DISPATCHER_NS,
            "POD_NAME": "e2e-dispatcher", "ACCELSCORE_METRICS_ADDRESS": f"127.0.0.1:{port}"})
        procs.wait_until("the dispatcher ready (watches synced)", partial(kueue.http_ready, port), 60,
                         check=[(self.cfg, "dispatcher")])

    def set_busy(self, busy: dict[str, dict[int, int]], expect: dict[str, dict[str, int]]) -> dict[str, Any]:
        """Push these busy counts and wait until the hub holds the fit scores `expect` says (cluster -> score ->
        pods); returns what the hub held."""
        for cluster, counts in busy.items():
            self.feeds[cluster].set_busy({f"{cluster}-gpu-{i}": n for i, n in counts.items()})
        h = Hub(self.cfg)
        try:
            seen: dict[str, Any] = {}

            def held() -> bool:
                seen.update({cl: {name: h.fits(cl, name) for name in names} for cl, names in expect.items()})
                return seen == expect

            procs.wait_until(f"the hub's scores {expect}", held, 90, every_s=0.5,
                             check=[(self.cfg, f.name) for f in self.feeds.values()])
            return seen
        finally:
            h.api.close()

    def clear_jobs(self) -> None:
        """Delete the namespace's Jobs on the hub; wait until their Workloads are gone there and on the workers."""
        self.c.hub.run("-n", NS, "delete", "jobs", "--all", "--cascade=background", "--wait=false")
        for name, k in (("hub", self.c.hub), *self.workers.items()):
            procs.wait_until(f"no Workload left in {NS} on {name}", partial(no_workloads, k), 120, every_s=1)

    def close(self) -> None:
        errors = []
        for feed in self.feeds.values():
            try:
                feed.stop()
            except Exception as err:  # noqa: BLE001 -- every part is stopped even when one fails
                errors.append(f"{feed.name}: {err}")
        for name in ("dispatcher", *(f"kueue-{p}" for p in KUEUE_PLANES), f"{AGENTLESS_CLUSTER}-apiserver",
                     f"{AGENTLESS_CLUSTER}-etcd"):
            procs.stop(self.cfg, name)  # each only if it was started
        for prefix in ("hub", "managed"):  # their apiservers go on: no webhook may point at a stopped Kueue
            k = self.planes[prefix].kubectl
            k.run("delete", "mutatingwebhookconfiguration/kueue-mutating-webhook-configuration",
                  "validatingwebhookconfiguration/kueue-validating-webhook-configuration", "--ignore-not-found",
                  check=False)
        self.c.hub.run("delete", "--ignore-not-found", "-f", "-", stdin=yaml.safe_dump_all(dispatcher_rbac()),
                       check=False)
        if errors:
            raise procs.RigError("; ".join(errors))


@contextmanager
def multikueue_rig(c: Checker) -> Iterator[Rig]:
    rig = Rig(c)
    try:
        rig.up()
        yield rig
    finally:
        rig.close()


def wait_placed(hub: Hub, jobs: list[str], done: Callable[[dict[str, tuple[list[str], str]]], bool],
                timeout_s: float, nominated: dict[str, list[str]] | None = None
                ) -> tuple[dict[str, tuple[list[str], str]], float]:
    """Poll the hub's Workloads of `jobs` every 0.1 s until `done`; (what was seen, seconds). `nominated` collects
    each Job's first nomination seen (Kueue empties it once the Workload is admitted)."""
    t0 = time.monotonic()
    while True:
        wls = hub.workloads()
        seen = {j: placed(wls.get(j)) for j in jobs}
        if nominated is not None:
            for j, (names, _) in seen.items():
                if names and j not in nominated:
                    nominated[j] = names
        if done(seen) or time.monotonic() - t0 > timeout_s:
            return seen, time.monotonic() - t0
        time.sleep(0.1)


def admitted_on(c: Checker, rig: Rig, hub: Hub, name: str, expected: str, why: str) -> None:
    """Submit nothing; wait until Job `name` runs on a worker and check that worker, there and on the hub."""
    first: dict[str, list[str]] = {}
    seen, took = wait_placed(hub, [name], lambda s: bool(s[name][1]), 120, first)
    nominated, cluster = first.get(name, []), seen[name][1]
    wl = hub.workloads().get(name)
    there = bool(cluster) and worker_admitted(rig.workers[cluster], wl["metadata"]["name"]) if wl else False
    c.check(f"multikueue: {name} admitted on the cluster the scores rank first", f"{expected} ({why})",
            f"nominated {nominated or 'before the first look'}, admitted on {cluster or 'none'} (Admitted there: "
            f"{there}) after {took:.1f} s", cluster == expected and there)


def run(c: Checker) -> None:
    with multikueue_rig(c) as rig:
        hub = Hub(c.cfg)
        try:
            scenario(c, rig, hub)
        finally:
            hub.api.close()


def scenario(c: Checker, rig: Rig, hub: Hub) -> None:
    one, two = MANAGED_CLUSTER, AGENTLESS_CLUSTER
    rig.clear_jobs()  # what an interrupted run left
    # 1. a 2 x 4 GPU gang: cluster1 has one free 4-GPU slot, cluster2 two (config order would try cluster1 first)
    seen = rig.set_busy({one: {0: 4, 1: 8}, two: {0: 0, 1: 8, 2: 8}},
                        {one: {"gpuClusterFit4": 1}, two: {"gpuClusterFit4": 2}})
    c.check("multikueue: the hub's scores follow the pushed reports", "cluster1 fit4 1, cluster2 fit4 2",
            seen, True)
    c.hub.apply([job("gang-2x4", 2, 4)])
    admitted_on(c, rig, hub, "gang-2x4", two, "the only cluster whose gpuClusterFit4 holds 2 pods")
    # 2. one GPU pinned to the H100: only cluster1 has that product, though cluster2 has more room
    c.hub.apply([job("pinned-h100", 1, 1, product=H100)])
    admitted_on(c, rig, hub, "pinned-h100", one, f"gpuClusterFit1.{H100} only there")
    rig.clear_jobs()
    # 3. every node full: a one-node Job waits, nominated nowhere; a node freed on cluster2 moves it there
    rig.set_busy({one: {0: 8, 1: 8}, two: {0: 8, 1: 8, 2: 8}}, {one: {"gpuClusterFit8": 0}, two: {"gpuClusterFit8": 0}})
    c.hub.apply([job("next-1x8", 1, 8)])
    waiting, _ = wait_placed(hub, ["next-1x8"], lambda s: False, 5)  # 5 s of watching: no nomination
    c.equal("multikueue: with no room anywhere the Job is nominated nowhere", ([], ""), waiting["next-1x8"])
    rig.feeds[two].set_busy({f"{two}-gpu-0": 0})
    t0 = time.monotonic()
    while hub.fits(two, "gpuClusterFit8") != 1 and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    changed = time.monotonic()
    moved, took = wait_placed(hub, ["next-1x8"], lambda s: s["next-1x8"][0] == [two], 30)
    c.check("multikueue: a score change moves the next Job", f"nominated [{two}] within {MOVE_WITHIN_S:.0f} s of the "
            "hub's score change", f"{moved['next-1x8'][0]} {took:.2f} s after (the change reached the hub "
            f"{changed - t0:.1f} s after the push)", moved["next-1x8"][0] == [two] and took <= MOVE_WITHIN_S)
    admitted_on(c, rig, hub, "next-1x8", two, "it was nominated there")
    rig.clear_jobs()
    # 4. a burst of one-node Jobs: cluster1 has 2 free nodes, cluster2 3; the ledger counts each nomination
    rig.set_busy({one: {0: 0, 1: 0}, two: {0: 0, 1: 0, 2: 0}}, {one: {"gpuClusterFit8": 2}, two: {"gpuClusterFit8": 3}})
    burst = [f"burst-{i}" for i in range(5)]
    c.hub.apply([job(name, 1, 8) for name in burst])
    spread, took = wait_placed(hub, burst, lambda s: all(v[1] for v in s.values()), 180)
    count = {one: 0, two: 0, "none": 0}
    for _, cluster in spread.values():
        count[cluster or "none"] += 1
    c.check("multikueue: a burst of 5 one-node Jobs spread as the ledger says",
            f"{{'{one}': 2, '{two}': 3, 'none': 0}} (each cluster's free nodes, gpuClusterFit8)",
            f"{count} after {took:.1f} s", count == {one: 2, two: 3, "none": 0})
    rig.clear_jobs()
