"""Fleets of each kind users run (issue 23): MIG, shared GPUs, GPU models, NVLink domains, and all of them at once.

Generated into fixtures/fleets/ by `python -m accelscore.simulator.fleetgen`; the node reports come from
`accelscore.simulator.nodegen` (MIG layouts, share counts and labels as NVIDIA's tools publish them).
mig-parted's named layouts (NVIDIA mig-parted `examples/config.yaml`): `all-balanced` on an 80 GB A100 or H100
is 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb per GPU; `all-3g.40gb` is 2 x 3g.40gb; `all-1g.10gb` is 7 x 1g.10gb.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from accelscore.simulator.nodegen import (
    A100,
    A100_80,
    CLIQUE_LABEL,
    GB200,
    H100,
    L4,
    L40S,
    MI300X,
    T4,
    V5E,
    Layout,
    Part,
    clique,
    node_report,
)

BALANCED = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
ALL_3G = ("3g.40gb", "3g.40gb")
ALL_1G = ("1g.10gb",) * 7
_CLAIMS = {"platform.open-cluster-management.io": "OpenShift"}


def _busy(rng: random.Random, per_node: int, free: int) -> list[int]:
    """Device indices held, leaving exactly `free` free, chosen at random."""
    return sorted(rng.sample(range(per_node), per_node - free))


def _cluster(name: str, labels: dict[str, str], reports: list[dict], **extra: Any) -> dict:
    return {"cluster": name, "labels": labels, "claims": _CLAIMS, **extra, "reports": reports}


def _whole(rng: random.Random, prefix: str, part: Part, free: Sequence[int]) -> list[dict]:
    return [node_report(f"{prefix}-{i}", part, _busy(rng, part.per_node, f)) for i, f in enumerate(free)]


def _mig(rng: random.Random, name: str, part: Part, layout: tuple[str, ...], free: int, *,
         strategy: str = "mixed") -> dict:
    """A node whose every GPU is MIG-enabled with `layout`; `free` instances left unassigned, at random."""
    slots = [(g, s) for g in range(part.per_node) for s in range(len(layout))]
    busy = frozenset(rng.sample(slots, len(slots) - free))
    return node_report(name, part, [], layout=Layout(mig=(layout,) * part.per_node, mig_busy=busy, strategy=strategy))


def _shared(rng: random.Random, name: str, part: Part, shares: int, held: int, sharing: str) -> dict:
    """A node whose GPUs are each cut into `shares` (time-slicing or HAMi); `held` shares assigned in all."""
    slots = [g for g in range(part.per_node) for _ in range(shares)]
    counts: dict[int, int] = {}
    for g in rng.sample(slots, held):
        counts[g] = counts.get(g, 0) + 1
    return node_report(name, part, [], layout=Layout(shares=shares, sharing=sharing, shares_held=counts))


def _trays(rng: random.Random, prefix: str, domain: str, busy_gpus: Sequence[int]) -> list[dict]:
    """GB200 NVL72 compute trays of one NVLink domain (18 x 4 GPUs), labelled with its clique."""
    value = clique(domain, 32766)
    return [node_report(f"{prefix}-{i:02d}", GB200, _busy(rng, 4, 4 - b), labels={CLIQUE_LABEL: value})
            for i, b in enumerate(busy_gpus)]


def mig(rng: random.Random) -> list[dict]:
    """MIG as it is: partitioned-idle A100s beside whole ones, single-strategy H100s, a whole A100-40GB cluster.

    a100-mig: two all-balanced nodes with every instance idle (0 whole GPUs, 16 + 8 + 8 instances each), one
    half-used, one all-3g.40gb, and two MIG-off nodes (8 and 3 free): room for 1 eight-GPU pod, not 3.
    """
    return [
        _cluster("a100-mig", {"region": "west", "accelerator": "a100"}, [
            _mig(rng, "a100m-0", A100_80, BALANCED, 32), _mig(rng, "a100m-1", A100_80, BALANCED, 32),
            _mig(rng, "a100m-2", A100_80, BALANCED, 14), _mig(rng, "a100m-3", A100_80, ALL_3G, 6),
            *_whole(rng, "a100w", A100_80, [8, 3])]),
        _cluster("a100-whole", {"region": "east", "accelerator": "a100"},
                 _whole(rng, "a100x", A100, [8, 8, 4, 0, 2, 8, 8, 6])),
        _cluster("h100-single", {"region": "central", "accelerator": "h100"}, [
            _mig(rng, "h100s-0", H100, ALL_1G, 36, strategy="single"),
            _mig(rng, "h100s-1", H100, ALL_1G, 0, strategy="single"),
            _mig(rng, "h100s-2", H100, ALL_1G, 56, strategy="single"),
            *_whole(rng, "h100w", H100, [8, 0, 8, 4])]),
    ]


def shared(rng: random.Random) -> list[dict]:
    """Shares are not GPUs: an L4 cluster time-sliced 4 ways, T4s split 10 ways by HAMi, whole-GPU clusters."""
    return [
        _cluster("l4-timesliced", {"region": "west", "accelerator": "l4"},
                 [_shared(rng, f"l4ts-{i}", L4, 4, held, "time-slicing")
                  for i, held in enumerate([32, 20, 9, 30, 0, 26])]),
        _cluster("t4-hami", {"region": "edge", "accelerator": "t4"},
                 [_shared(rng, f"t4h-{i}", T4, 10, held, "hami") for i, held in enumerate([40, 12, 33, 0, 25])]),
        _cluster("l40s-whole", {"region": "east", "accelerator": "l40s"},
                 _whole(rng, "l40s", L40S, [8, 4, 2, 0, 8, 6, 8, 0])),
        _cluster("h100-whole", {"region": "central", "accelerator": "h100"},
                 _whole(rng, "h100", H100, [8, 0, 5, 8, 8, 2])),
    ]


def models(rng: random.Random) -> list[dict]:
    """GPU models side by side, for jobs pinned to one by a nodeSelector on the GPU product label."""
    return [
        _cluster("h100-a", {"region": "east"}, _whole(rng, "h100a", H100, [8, 8, 3, 0, 0, 5, 1, 0])),
        _cluster("a100-80-b", {"region": "west"}, _whole(rng, "a100b", A100_80, [8, 2, 0, 6, 8, 0])),
        _cluster("a100-40-c", {"region": "central"}, _whole(rng, "a100c", A100, [4, 8, 0, 0, 8])),
        _cluster("l40s-t4-d", {"region": "edge"},
                 _whole(rng, "l40sd", L40S, [8, 0, 4, 2]) + _whole(rng, "t4d", T4, [4, 4, 0, 2, 4, 1])),
    ]


def nvlink(rng: random.Random) -> list[dict]:
    """NVLink domains: two GB200 NVL72 racks (one wholly free, one spread over by small jobs), a half-used rack,
    and an HGX H100 cluster (no clique label: no domain beyond a node)."""
    spread = [2 if i % 3 == 0 else 0 for i in range(18)]
    return [
        _cluster("gb200-racks", {"region": "east", "accelerator": "gb200"},
                 _trays(rng, "rack1", "racks", [0] * 18) + _trays(rng, "rack2", "racks2", spread)),
        _cluster("gb200-half", {"region": "west", "accelerator": "gb200"},
                 _trays(rng, "half", "half", [4] * 9 + [0] * 9)),
        _cluster("h100-hgx", {"region": "central", "accelerator": "h100"},
                 _whole(rng, "hgx", H100, [8, 8, 2, 0, 6, 8])),
    ]


def realistic(rng: random.Random) -> list[dict]:
    """The issue-23 fleet: MIG-partitioned A100/H100 (some partitioned but idle), L4 time-sliced 4 ways, a TPU
    cluster with two small GPU nodes, a large fragmented H100 cluster, A100-40GB, L40S + T4, and an H100 cluster
    that dies 90 minutes into a replay (scorer and agents stop, its nodes take no new work; the hub keeps its
    last scores until they expire, and CEL predicates would see them after that)."""
    return [
        _cluster("mig-a100-h100", {"region": "west"}, [
            _mig(rng, "migm-0", A100_80, BALANCED, 32), _mig(rng, "migm-1", A100_80, BALANCED, 32),
            _mig(rng, "migm-2", A100_80, ALL_3G, 9), _mig(rng, "migm-3", H100, ALL_1G, 30, strategy="single"),
            *_whole(rng, "migw", H100, [8, 2])]),
        _cluster("l4-timesliced", {"region": "west"},
                 [_shared(rng, f"l4-{i}", L4, 4, held, "time-slicing") for i, held in enumerate([30, 12, 20, 0])]),
        _cluster("tpu-heavy", {"region": "us"},
                 _whole(rng, "v5e", V5E, [4, 0, 0, 2, 4, 4, 1, 0, 4, 4]) + _whole(rng, "tpu-gpu", T4, [4, 2])),
        _cluster("h100-frag", {"region": "east"},
                 [*_whole(rng, "frag", H100, [1 + i % 3 for i in range(22)]), *_whole(rng, "fragw", H100, [8, 8])]),
        _cluster("a100-40", {"region": "central"}, _whole(rng, "a100", A100, [8, 8, 0, 3, 0, 6])),
        _cluster("l40s-t4", {"region": "edge"},
                 _whole(rng, "l40s", L40S, [8, 2, 0, 4]) + _whole(rng, "t4", T4, [4, 0, 4, 1, 4, 2])),
        _cluster("h100-dies", {"region": "south"}, _whole(rng, "dies", H100, [8, 8, 4, 0, 8, 2]),
                 diesAtSeconds=5400),
    ]


def homogeneous(rng: random.Random) -> list[dict]:
    """Three H100 clusters of one kind and size class, for single 8-GPU pods beside 4 x 8 gangs (gangs-200.yaml):
    single pods ranked by the most room broke up the whole nodes the gangs needed."""
    return [
        _cluster("h100-a", {"region": "east"}, _whole(rng, "h100a", H100, [8, 8, 8, 4, 2, 0, 8, 0, 8, 8])),
        _cluster("h100-b", {"region": "west"}, _whole(rng, "h100b", H100, [8, 0, 8, 2, 8, 0, 8, 8])),
        _cluster("h100-c", {"region": "central"}, _whole(rng, "h100c", H100, [8, 8, 0, 4, 8, 8])),
    ]


def vendors(rng: random.Random) -> list[dict]:
    """An AMD MI300X cluster beside NVIDIA H100 clusters (issue 29): its name sorts first, so any tie on a score
    that counted its GPUs as the plain GPU resource went its way; jobs asking AMD's resource can start only there."""
    return [
        _cluster("amd-mi300x", {"region": "east", "accelerator": "mi300x"},
                 _whole(rng, "mi300x", MI300X, [8, 8, 8, 8, 4, 0, 8, 2, 8, 8])),
        _cluster("h100-east", {"region": "east"}, _whole(rng, "h100e", H100, [8, 8, 4, 0, 8, 2])),
        _cluster("h100-west", {"region": "west"}, _whole(rng, "h100w", H100, [8, 0, 8, 6, 8, 1, 8])),
        _cluster("h100-north", {"region": "north"}, _whole(rng, "h100n", H100, [4, 8, 2, 8, 0])),
    ]


def _hgx_domain(rng: random.Random, prefix: str, domain: str, free: Sequence[int]) -> list[dict]:
    """8-GPU nodes sharing one NVLink domain (a multi-node NVLink HGX/NVL system), labelled with its clique."""
    value = clique(domain, 32765)
    return [node_report(f"{prefix}-{i:02d}", H100, _busy(rng, 8, f), labels={CLIQUE_LABEL: value})
            for i, f in enumerate(free)]


def nvl72(rng: random.Random) -> list[dict]:
    """GB200/GB300 NVL72 racks with fragmented domains (issue 29): `gb-frag` has one rack with 34 free GPUs
    scattered 1-2 per tray (no tray wholly free) and one with 26 free of which 6 trays wholly free; `gb-whole` one
    rack with 10 whole trays; `hgx-nvl` 8-GPU nodes in one NVLink domain; `h100-plain` no domain at all."""
    scattered = [2] * 16 + [3] * 2  # GPUs busy per tray: 34 free, none of 18 trays whole
    six_whole = [0] * 6 + [4] * 10 + [3] * 2  # 24 + 2 = 26 free, 6 whole trays
    return [
        _cluster("gb-frag", {"region": "east", "accelerator": "gb200"},
                 _trays(rng, "fraga", "frag-a", scattered) + _trays(rng, "fragb", "frag-b", six_whole)),
        _cluster("gb-whole", {"region": "west", "accelerator": "gb300"},
                 _trays(rng, "whole", "whole", [0] * 10 + [4] * 8)),
        _cluster("hgx-nvl", {"region": "central", "accelerator": "h100"},
                 _hgx_domain(rng, "hgxn", "hgx-nvl", [8, 8, 0, 8, 4, 8])),
        _cluster("h100-plain", {"region": "south", "accelerator": "h100"}, _whole(rng, "plain", H100, [8, 8, 2, 0])),
    ]


FLEETS = {"homogeneous": homogeneous, "mig": mig, "shared": shared, "models": models, "nvlink": nvlink,
          "realistic": realistic, "vendors": vendors, "nvl72": nvl72}
