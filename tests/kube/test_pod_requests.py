"""Effective pod requests, counted the way the scheduler counts them."""

from __future__ import annotations

from typing import Any

import pytest

from accelscore.kube.pod_requests import InvalidQuantity, effective_requests


def _c(name: str, restart: str | None = None, **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if restart:
        c["restartPolicy"] = restart
    return c


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
         **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": containers,
                                                                   "initContainers": init or [], **spec}}


GiB = 1024.0**3

CASES = [
    ("app-containers-sum", _pod([_c("a", cpu="500m", memory="1Gi"), _c("b", cpu="250m")]),
     {"cpu": 0.75, "memory": GiB}),
    ("missing-requests-count-zero", _pod([{"name": "a"}, _c("b", cpu="1")]), {"cpu": 1.0}),
    ("no-containers", _pod([]), {}),
    ("init-larger-than-apps-wins", _pod([_c("a", cpu="1")], [_c("i", cpu="3")]), {"cpu": 3.0}),
    ("init-smaller-than-apps-loses", _pod([_c("a", cpu="2")], [_c("i", cpu="1")]), {"cpu": 2.0}),
    ("init-max-not-sum", _pod([_c("a", cpu="1")], [_c("i1", cpu="2"), _c("i2", cpu="2")]), {"cpu": 2.0}),
    ("sidecar-adds-to-apps", _pod([_c("a", cpu="1")], [_c("s", "Always", cpu="500m")]), {"cpu": 1.5}),
    ("init-after-sidecar-includes-it",
     _pod([_c("a", cpu="1")], [_c("s", "Always", cpu="1"), _c("i", cpu="3")]), {"cpu": 4.0}),
    ("init-before-sidecar-excludes-it",
     _pod([_c("a", cpu="1")], [_c("i", cpu="3"), _c("s", "Always", cpu="1")]), {"cpu": 3.0}),
    ("per-resource-max", _pod([_c("a", cpu="2", memory="1Gi")], [_c("i", cpu="1", memory="4Gi")]),
     {"cpu": 2.0, "memory": 4 * GiB}),
    ("extended-resources-counted",
     _pod([_c("a", **{"nvidia.com/gpu": "2"}), _c("b", **{"nvidia.com/gpu": "1"})],
          [_c("i", **{"nvidia.com/gpu": "1"})]),
     {"nvidia.com/gpu": 3.0}),
    ("pod-level-overrides-cpu-memory",
     _pod([_c("a", cpu="1", memory="1Gi", **{"nvidia.com/gpu": "1"})],
          resources={"requests": {"cpu": "4", "memory": "8Gi"}}),
     {"cpu": 4.0, "memory": 8 * GiB, "nvidia.com/gpu": 1.0}),
    ("pod-level-only-cpu", _pod([_c("a", cpu="1", memory="1Gi")], resources={"requests": {"cpu": "2"}}),
     {"cpu": 2.0, "memory": GiB}),
    ("overhead-added", _pod([_c("a", cpu="1")], overhead={"cpu": "250m", "memory": "120Mi"}),
     {"cpu": 1.25, "memory": 120 * 1024.0**2}),
    ("overhead-after-pod-level", _pod([_c("a", cpu="1")], resources={"requests": {"cpu": "2"}},
                                      overhead={"cpu": "100m"}), {"cpu": 2.1}),
    ("restart-policy-other-than-always-is-ordinary-init",
     _pod([_c("a", cpu="1")], [_c("i", "OnFailure", cpu="2")]), {"cpu": 2.0}),
]


@pytest.mark.parametrize(("pod", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_effective_requests(pod: dict[str, Any], expected: dict[str, float]) -> None:
    assert effective_requests(pod) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "why"),
    [("1e30", "larger"), ("-1", "negative"), ("lots", "not a quantity"), ("", "not a quantity")],
    ids=["absurd", "negative", "garbage", "empty"],
)
def test_bad_quantity_names_the_field(value: str, why: str) -> None:
    pod = _pod([_c("a", cpu="1"), _c("b", cpu=value)])
    with pytest.raises(InvalidQuantity) as err:
        effective_requests(pod)
    assert err.value.field == "spec.containers[1].resources.requests.cpu"
    assert why in err.value.why
