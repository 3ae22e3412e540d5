"""The dispatcher's pure core (no I/O, no clock): a Workload's pod sets -> the demand it makes (`shapes`), the
score that answers "can it start there now" for each demand (`table`, one table), the nominations made but not
yet shown by the scores (`ledger`), and the ordered clusters to nominate (`rank`). Shared by the hub process
(`accelscore.dispatcher`) and the simulator's `dispatcher` policy, so both decide with the same code."""

from accelscore.dispatch.ledger import Ledger
from accelscore.dispatch.rank import ClusterView, Held, Nomination, Reason, live_view, rank
from accelscore.dispatch.shapes import Demand, Kind, Unscoreable, demand_of
from accelscore.dispatch.table import Need, needs_of

__all__ = ["ClusterView", "Demand", "Held", "Kind", "Ledger", "Need", "Nomination", "Reason", "Unscoreable",
           "demand_of", "live_view", "needs_of", "rank"]
