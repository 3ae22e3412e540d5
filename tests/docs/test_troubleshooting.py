"""docs/troubleshooting.md covers every reason the scorer refuses a report, and the log lines it quotes exist."""

from __future__ import annotations

import re
from pathlib import Path

from accelscore.scorer.ingest.validate import RejectReason

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "troubleshooting.md"


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_reject_reason_has_a_row_and_no_row_is_invented() -> None:
    rows = re.findall(r"^\| `(\w+)` \|", _section(DOC.read_text(encoding="utf-8"), "Reports refused"), re.M)
    assert len(rows) == len(set(rows))
    assert set(rows) == {reason.value for reason in RejectReason}


def test_quoted_log_and_reason_texts_appear_in_the_code() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "accelscore").rglob("*.py"))
    quoted = ["refused a report from", "push failed (", "the scorer rejected the report", "hub denies",
              "does not exist (is --cluster-name / CLUSTER_NAME this managed",
              "hub rejects our credentials even after reloading the hub kubeconfig",
              "no --scorer-address: reports are not pushed (metrics only)", "PodResources socket directory not mounted",
              "(kubelet restarting?)", "no NVIDIA driver on this node", "is advertised but NVML sees no GPU",
              "the NVIDIA driver library ", "allocatable is 0 but devices exist; unknown until the device plugin",
              "is not for audience", "is not the agent service account", "token is not bound to a pod",
              "no health signal could be read", "cannot read token file",
              "its certificate is not signed by the CA in", "cannot read the scorer's CA file",
              "ingest is PLAINTEXT (--insecure-plaintext)"]
    text = " ".join(DOC.read_text(encoding="utf-8").split())  # the doc wraps lines
    for phrase in quoted:
        assert phrase in text, f"the doc no longer quotes {phrase!r}: drop it here"
        assert phrase in code, f"the code no longer says {phrase!r}: update docs/troubleshooting.md"
