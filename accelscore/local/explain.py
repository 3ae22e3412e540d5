"""Why local mode's scores are what they are: the GPU assignment rule, each collector's state and reason,
and which accelerator scores are 0 for lack of data. The table prints it; JSON/YAML carry it as
annotations on each AddOnPlacementScore, so the printed objects keep their shape."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from accelscore.agent import cycle_data
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.report import GpuAssignmentRule
from accelscore.agent.runner import Cycle
from accelscore.agent.snapshots import NvidiaSnapshot
from accelscore.crds.placement_score import ScoreObject
from accelscore.devices import VENDORS, AcceleratorFamily, Health, family_resources

ANNOTATION_DOMAIN = "accelscore.io"
RULE_ANNOTATION = f"{ANNOTATION_DOMAIN}/gpu-assignment"
COLLECTOR_ANNOTATION = f"collector.{ANNOTATION_DOMAIN}/"  # + "<name>-state" and "<name>-reason"
NOTE_ANNOTATION = f"{ANNOTATION_DOMAIN}/"  # + "gpu-scores-note" and "tpu-scores-note"
COMPAT = "resource-usage-score"


@dataclass(frozen=True)
class CollectorLine:
    """One collector's state and reason in one cycle."""

    name: str
    state: str
    reason: str


@dataclass(frozen=True)
class Explanation:
    """What a reader of local mode's output needs beside the scores."""

    gpu_assignment: str  # e.g. "kubelet PodResources"
    collectors: tuple[CollectorLine, ...]
    notes: tuple[tuple[str, str], ...]  # ("gpu" | "tpu", one line on why its scores are 0 or counted busy)


def explain(cycle: Cycle, rule: GpuAssignmentRule) -> Explanation:
    """The explanation of one cycle's scores under `rule`."""
    collectors = tuple(CollectorLine(name, r.state.value, r.reason) for name, r in cycle.readings.items())
    notes = tuple((family, note) for family, note in (("gpu", _gpu_note(cycle, rule)), ("tpu", _tpu_note(cycle, rule)))
                  if note)
    return Explanation(_rule_text(cycle, rule), collectors, notes)


def _rule_text(cycle: Cycle, rule: GpuAssignmentRule) -> str:
    """The rule as printed; "unknown" says which kubelet state made it so."""
    if rule is GpuAssignmentRule.UNKNOWN:
        return f"unknown: {_state_of(cycle.get('kubelet'), 'kubelet')}"
    return rule.value


def _state_of(reading: Reading[object] | None, name: str) -> str:
    """'<name> <STATE>: <reason>', the way every note names a collector."""
    if reading is None:
        return f"{name} not run"
    return f"{name} {reading.state.value}: {reading.reason}" if reading.reason else f"{name} {reading.state.value}"


def _gpu_note(cycle: Cycle, rule: GpuAssignmentRule) -> str:
    """Why gpu* scores are 0 (or which GPUs count busy for lack of data); "" when the data is all there."""
    gpu_collectors = [v.collector for v in VENDORS if v.family is AcceleratorFamily.GPU]
    if not any((r := cycle.get(c)) is not None and r.state is State.OK for c in gpu_collectors):
        states = "; ".join(_state_of(cycle.get(c), c) for c in gpu_collectors if cycle.get(c) is not None)
        return f"gpu* scores are 0 ({COMPAT} -100): {states or 'no GPU collector ran'}"
    if rule is GpuAssignmentRule.UNKNOWN:
        kubelet = _state_of(cycle.get("kubelet"), "kubelet")
        return f"gpu free/fit/memory scores are 0 ({COMPAT} -100): GPU assignment unknown ({kubelet})"
    data: NvidiaSnapshot | None = cycle.data(cycle_data.NVIDIA)  # None unless the collector read OK
    unread = [str(g.index) for g in (data.gpus if data else ())
              if g.processes is None and g.health is not Health.UNHEALTHY]  # a lost GPU is busy anyway
    if rule is GpuAssignmentRule.NVML_PROCESSES and unread:
        return f"GPU {', '.join(unread)} counted busy: NVML would not list its processes (unknown is never free)"
    return _compat_note(cycle, rule, "gpu", " + ".join(family_resources(AcceleratorFamily.GPU)))


def _tpu_note(cycle: Cycle, rule: GpuAssignmentRule) -> str:
    """Why tpu* scores are 0 for lack of data; "" when the data is all there."""
    tpu = cycle.get("tpu")
    if tpu is None or tpu.state is not State.OK:
        return f"tpu* scores are 0 ({COMPAT} -100): {_state_of(tpu, 'tpu')}"
    if rule is not GpuAssignmentRule.KUBELET:
        kubelet = _state_of(cycle.get("kubelet"), "kubelet")
        return f"tpu free scores are 0 ({COMPAT} -100): TPU assignment needs the kubelet ({kubelet})"
    return _compat_note(cycle, rule, "tpu", " + ".join(family_resources(AcceleratorFamily.TPU)))


def _compat_note(cycle: Cycle, rule: GpuAssignmentRule, family: str, resource: str) -> str:
    """With the kubelet but no Kubernetes API, the drop-in scores have no allocatable/requested to read."""
    node = cycle.get("node")
    if rule is GpuAssignmentRule.KUBELET and (node is None or node.state is not State.OK):
        return f"{COMPAT} {family}* are -100: {resource} allocatable/requested need the Kubernetes API " \
               f"({_state_of(node, 'node')})"
    return ""


def annotate(objects: list[ScoreObject], explanation: Explanation) -> list[ScoreObject]:
    """Copies of the APS objects with the explanation as `metadata.annotations` (string values only)."""
    annotations = {RULE_ANNOTATION: explanation.gpu_assignment}
    for line in explanation.collectors:
        annotations[f"{COLLECTOR_ANNOTATION}{line.name}-state"] = line.state
        annotations[f"{COLLECTOR_ANNOTATION}{line.name}-reason"] = line.reason
    for family, note in explanation.notes:
        annotations[f"{NOTE_ANNOTATION}{family}-scores-note"] = note
    annotated = copy.deepcopy(objects)
    for obj in annotated:
        obj["metadata"].setdefault("annotations", {}).update(annotations)
    return annotated


def table_lines(explanation: Explanation) -> list[str]:
    """The rule, the notes, then one row per collector."""
    lines = [f"GPU assignment: {explanation.gpu_assignment}", *(note for _, note in explanation.notes), ""]
    lines.append(f"{'collector':<10} {'state':<8} reason")
    lines += [f"{c.name:<10} {c.state:<8} {c.reason or '-'}" for c in explanation.collectors]
    return lines
