"""faults: the scorer Pod deleted → its replacement takes over with no withdrawal on the hub (every version of the
score object the hub served meanwhile still holds scores); an overwrite of its score object (the stale form, with the
hub guard's identity) → restored by the scorer within seconds; the scorer stopped (node cordoned, its Pod deleted, the
new one Pending) → with the hub guard running, a shipped example Placement drops the cluster within 60 s of the
score object's validUntil, and takes it back once the scorer publishes again."""

from __future__ import annotations

import json
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

from accelscore.scorer.publish.policy import EXPIRED_REASON, FRESH_CONDITION, stale_form
from e2e.checks.hub import agentless_live, decided, example, valid_until
from e2e.checks.install import ADDON_NS, SCORER, all_ready, install_addon, running_on_node
from e2e.checks.log import Checker
from e2e.rig import lifecycle, procs
from e2e.rig.config import AGENTLESS_CLUSTER, MANAGED_CLUSTER, NODE_NAME
from e2e.rig.kube import Kubectl, condition, write_kubeconfig

LIVE = "gang-1gpu"
GUARD_NS = "accelscore-hub"
DROP_WITHIN_S = 60
RESTORE_WITHIN_S = 15  # "within seconds" (issue 28), with room for a loaded 2-core machine


class Watch:
    """Every version of one object the apiserver serves while it runs (`kubectl get --watch -o json`)."""

    def __init__(self, k: Kubectl, kind: str, name: str, namespace: str) -> None:
        argv = k.command("get", kind, name, "-n", namespace, "--watch", "--output-watch-events", "-o", "json")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def stop(self) -> list[dict[str, Any]]:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        decoder, events, at = json.JSONDecoder(), [], 0
        while at < len(out):
            while at < len(out) and out[at].isspace():
                at += 1
            if at >= len(out):
                break
            event, at = decoder.raw_decode(out, at)
            events.append(event)
        return events


def scorer_pods(c: Checker) -> list[str]:
    return [line.split()[0] for line in running_on_node(c.managed, ADDON_NS, SCORER)]


def version_line(obj: dict[str, Any]) -> str:
    """One served version: resourceVersion, score count, its ScoresFresh condition and who last wrote it (each
    managedFields entry's manager, operation, subresource and time), so a FAIL names the writer and its reason."""
    status = obj.get("status") or {}
    fresh = [f"{x.get('status')}/{x.get('reason')}: {x.get('message')}" for x in status.get("conditions") or []
             if x.get("type") == FRESH_CONDITION]
    writers = [f"{m.get('manager')} {m.get('operation')} {m.get('subresource', '')} {m.get('time')}"
               for m in obj["metadata"].get("managedFields") or []]
    return (f"rv {obj['metadata'].get('resourceVersion')}: {len(status.get('scores') or [])} scores, validUntil "
            f"{status.get('validUntil')}, {FRESH_CONDITION} {fresh}, written by {writers}")


def save_logs(c: Checker, pods: list[str], suffix: str) -> None:
    """The scorer Pods' logs into the rig's log directory (kept after `down`; the node's pod logs are not)."""
    for pod in pods:
        proc = c.managed.run("logs", "-n", ADDON_NS, pod, "--all-containers", check=False)
        (c.cfg.logs / f"faults-{pod}-{suffix}.log").write_text(proc.stdout + proc.stderr)


def pod_deleted(c: Checker) -> None:
    before = scorer_pods(c)
    watch = Watch(c.hub, "addonplacementscore", "accelscore", MANAGED_CLUSTER)
    time.sleep(1)
    save_logs(c, before, "before-delete")
    c.managed.run("delete", "pod", "-n", ADDON_NS, *before, "--wait=true", timeout_s=120)
    c.wait("faults: a new scorer Pod Running and Ready after the delete", f"1 new Pod Running on {NODE_NAME}",
           lambda: [p for p in running_on_node(c.managed, ADDON_NS, SCORER) if p.split()[0] not in before],
           all_ready, 180)
    first_until = valid_until(c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER))
    # the new scorer publishes (a refresh of validUntil) before the watch stops, so its writes are in it too
    c.wait("faults: the new scorer refreshed validUntil", "a later validUntil",
           lambda: valid_until(c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER)),
           lambda v: first_until is not None and v is not None and v > first_until, 90, every_s=2)
    events = watch.stop()
    save_logs(c, scorer_pods(c), "after-delete")
    versions = [e["object"] for e in events if e.get("type") in ("ADDED", "MODIFIED")]
    emptied = [version_line(v) for v in versions if not (v.get("status") or {}).get("scores")]
    deleted = [e for e in events if e.get("type") == "DELETED"]
    c.check("faults: scorer Pod deleted → no withdrawal (every version on the hub holds scores)",
            "0 versions without scores", f"{len(emptied) + len(deleted)} of {len(versions)} versions without scores"
            + "".join(f"; {line}" for line in emptied), bool(versions) and not emptied and not deleted)


def guard_kubeconfig(c: Checker) -> str:
    """A token of the hub guard's own ServiceAccount (the install made it): the guard runs as it would in its Pod."""
    token = c.hub.run("-n", GUARD_NS, "create", "token", "accelscore-hub-guard", "--duration", "1h").stdout.strip()
    hub = lifecycle.hub(c.cfg)
    return str(write_kubeconfig(c.cfg.state / "hub-guard.kubeconfig", server=hub.server, ca=hub.ca.cert,
                                name="accelscore-hub-guard", token=token))


def stale(obj: dict[str, Any] | None) -> str:
    """What the hub guard leaves in an expired `accelscore` object: no scores, no validUntil, ScoresFresh False."""
    status = (obj or {}).get("status") or {}
    fresh = [f"{x.get('status')}/{x.get('reason')}" for x in status.get("conditions") or []
             if x.get("type") == FRESH_CONDITION]
    return f"scores {len(status.get('scores') or [])}, validUntil {status.get('validUntil')}, {FRESH_CONDITION} {fresh}"


def placed_scorers(c: Checker) -> tuple[list[str], list[str]]:
    """(scorer Pods bound to a node, scorer Pods the scheduler found Unschedulable)."""
    pods = c.managed.items("pods", ADDON_NS, SCORER)
    return ([p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")],
            [p["metadata"]["name"] for p in pods if condition(p, "PodScheduled") == "False"])


def stop_scorer(c: Checker) -> None:
    """Nowhere to run (node cordoned), its Pod deleted, until the replacement is Unschedulable: the scheduler can
    bind a replacement before its cache sees the cordon (seen at load 30: the scorer came back, found no
    schedulable node and withdrew its scores itself, so the drop was not the guard's)."""
    c.managed.run("cordon", NODE_NAME)

    def stopped() -> bool:
        bound, unschedulable = placed_scorers(c)
        if bound:
            c.managed.run("delete", "pod", "-n", ADDON_NS, *bound, "--wait=true", timeout_s=120)
            return False
        return bool(unschedulable)

    c.wait("faults: the scorer stopped (its replacement Unschedulable on the cordoned node)", "no scorer Pod bound",
           lambda: placed_scorers(c), lambda _: stopped(), 180, every_s=2)


def scorer_stopped(c: Checker) -> None:
    """The shipped example `gang-1gpu` (prioritizers only, as docs/placement.md rule 3 asks) over two live clusters:
    the agentless one is live with nothing free (`clusterLive` 1), so it loses to cluster1 (a tie at worst, broken
    by name) until cluster1's scores are withdrawn. OCM v1.2.0 requeues a Placement on a score object's change only
    when one of its prioritizers names that object (`indexPlacementsByScore`), so the guard's rewrite moves this
    one at once; a Placement that reads scores only in a CEL predicate waits for the 10-minute resync."""
    import sys

    # the hub guard: the shipped Deployment cannot run on the hub (it has no node), so the same program runs here
    # with the Deployment's settings and its ServiceAccount's token
    guard = Path(sys.executable).parent / "accelscore"
    procs.start(c.cfg, "hub-guard", [guard, "hub-guard"], env={
        "KUBECONFIG": guard_kubeconfig(c), "ACCELSCORE_GUARD_GRACE": "2",
        "ACCELSCORE_METRICS_ADDRESS": f"127.0.0.1:{c.cfg.port('hub-guard-metrics')}"})
    agentless_live(c, {"clusterLive": 1})
    c.hub.apply([example(LIVE)])
    try:
        c.wait(f"faults: Placement {LIVE} (shipped example) decides the live cluster", [MANAGED_CLUSTER],
               partial(decided, c.hub, LIVE), lambda d: d == [MANAGED_CLUSTER], 90)
        stop_scorer(c)
        until = valid_until(c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER)) or time.time()
        procs.wait_until("the scorer's validUntil", lambda: time.time() > until, 180, every_s=1)
        moved = c.wait(f"faults: Placement {LIVE} drops {MANAGED_CLUSTER} whose scorer stopped (hub guard)",
                       [AGENTLESS_CLUSTER], partial(decided, c.hub, LIVE), lambda d: d == [AGENTLESS_CLUSTER],
                       DROP_WITHIN_S + 30)
        late = time.time() - until
        c.check("faults: dropped within 60 s of validUntil", f"<= {DROP_WITHIN_S} s",
                f"{late:.1f} s", moved == [AGENTLESS_CLUSTER] and late <= DROP_WITHIN_S)
        # waited for: the Placement can drop the cluster before the guard's rewrite (its grace is 2 s) when the
        # scorer saw the cordon before its Pod went and published its own withdrawal (`NoNodes`, validUntil set)
        expected = f"scores 0, validUntil None, {FRESH_CONDITION} ['False/{EXPIRED_REASON}']"
        c.wait(f"faults: the hub guard rewrote {MANAGED_CLUSTER}/accelscore to its stale form", expected,
               lambda: stale(c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER)),
               lambda seen: seen == expected, DROP_WITHIN_S)
        c.managed.run("uncordon", NODE_NAME)
        c.wait("faults: the scorer back after uncordon", f"1 Pod Running on {NODE_NAME}",
               lambda: running_on_node(c.managed, ADDON_NS, SCORER), all_ready, 180)
        c.wait(f"faults: Placement {LIVE} back on {MANAGED_CLUSTER} once its scorer publishes again",
               [MANAGED_CLUSTER], partial(decided, c.hub, LIVE), lambda d: d == [MANAGED_CLUSTER], 120)
    finally:
        c.managed.run("uncordon", NODE_NAME, check=False)
        c.hub.run("delete", "placement", LIVE, "-n", "default", "--ignore-not-found", check=False)
        c.hub.run("delete", "addonplacementscore", "accelscore", "-n", AGENTLESS_CLUSTER, "--ignore-not-found",
                  check=False)
        procs.require_alive(c.cfg, "hub-guard")
        procs.stop(c.cfg, "hub-guard")


def live(summary: str) -> bool:
    """A `stale()` summary of a live scorer's status: scores, a validUntil, ScoresFresh True."""
    return not summary.startswith("scores 0,") and "validUntil None" not in summary and \
        f"{FRESH_CONDITION} ['True/" in summary


def overwrite_restored(c: Checker) -> None:
    """Issue 28 item 8: a stale-form write by the hub guard's identity into a live cluster's scores (admission admits
    it: its CEL has no clock) is undone by the scorer, which watches its own score objects, within seconds (it
    once stood until the next refresh, 5 min 58 s). Written with the guard's own token; the guard is not running."""
    obj = c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER)
    if obj is None:
        c.check("faults: the scorer's score object to overwrite", f"{MANAGED_CLUSTER}/accelscore", "none", False)
        return
    before_obj = json.loads(json.dumps(obj))
    obj["status"] = stale_form("accelscore", obj["status"], now=time.time(), message="e2e faults: an overwrite")
    guard = Kubectl(Path(guard_kubeconfig(c)), "hub-guard", c.cfg.kubectl)
    stored = json.loads(guard.run("replace", "--subresource=status", "-o", "json", "-f", "-",
                                  stdin=json.dumps(obj)).stdout)
    written = time.monotonic()
    c.equal(f"faults: {MANAGED_CLUSTER}/accelscore overwritten in the stale form with the hub guard's identity",
            f"scores 0, validUntil None, {FRESH_CONDITION} ['False/{EXPIRED_REASON}']", stale(stored))

    def read() -> str:
        return stale(c.hub.get("addonplacementscore", "accelscore", MANAGED_CLUSTER))

    seen = c.wait(f"faults: the scorer restores its {MANAGED_CLUSTER}/accelscore", f"like before: {stale(before_obj)}",
                  read, live, RESTORE_WITHIN_S + 45, every_s=0.5)
    took = time.monotonic() - written
    c.check("faults: overwrite restored within seconds", f"<= {RESTORE_WITHIN_S} s", f"{took:.1f} s",
            live(seen or "") and took <= RESTORE_WITHIN_S)


def run(c: Checker) -> None:
    install_addon(c)
    pod_deleted(c)
    overwrite_restored(c)
    scorer_stopped(c)
