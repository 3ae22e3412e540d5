"""The dispatcher's `/metrics` (Prometheus text, built fresh on every scrape from the dispatcher's counters)."""

from __future__ import annotations

from accelscore.dispatch import Reason
from accelscore.dispatcher.controller import LATENCY_BUCKETS, WRITE_RESULTS, Dispatcher


def render(dispatcher: Dispatcher, *, leading: bool) -> bytes:
    """Nominations by reason, status writes by result, ledger size, score-change-to-nomination latency, leader."""
    d = dispatcher
    lines = ["# HELP accelscore_dispatcher_nominations_total nominations written, by why they were made",
             "# TYPE accelscore_dispatcher_nominations_total counter"]
    lines += [f'accelscore_dispatcher_nominations_total{{reason="{r.value}"}} {d.nominations[r.value]}'
              for r in Reason]
    lines += ["# HELP accelscore_dispatcher_writes_total Workload status writes, by result",
              "# TYPE accelscore_dispatcher_writes_total counter"]
    lines += [f'accelscore_dispatcher_writes_total{{result="{r}"}} {d.writes[r]}' for r in WRITE_RESULTS]
    lines += ["# HELP accelscore_dispatcher_ledger_entries nominations counted against clusters, not yet in their "
              "scores", "# TYPE accelscore_dispatcher_ledger_entries gauge",
              f"accelscore_dispatcher_ledger_entries {len(d.ledger)}"]
    lines += ["# HELP accelscore_dispatcher_score_to_nomination_seconds from a cluster's score change to the "
              "nomination it moved", "# TYPE accelscore_dispatcher_score_to_nomination_seconds histogram"]
    lines += [f'accelscore_dispatcher_score_to_nomination_seconds_bucket{{le="{b}"}} {n}'
              for b, n in zip(LATENCY_BUCKETS, d.latency.buckets, strict=True)]
    lines += [f'accelscore_dispatcher_score_to_nomination_seconds_bucket{{le="+Inf"}} {d.latency.count}',
              f"accelscore_dispatcher_score_to_nomination_seconds_sum {d.latency.total}",
              f"accelscore_dispatcher_score_to_nomination_seconds_count {d.latency.count}"]
    lines += ["# HELP accelscore_dispatcher_leader 1 while this replica holds the lease (only the leader writes)",
              "# TYPE accelscore_dispatcher_leader gauge", f"accelscore_dispatcher_leader {int(leading)}"]
    return ("\n".join(lines) + "\n").encode()
