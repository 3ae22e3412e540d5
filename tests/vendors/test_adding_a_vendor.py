"""Adding a vendor is one collector module plus one row in the vendor table (docs/vendors.md).

The test copies the package, adds exactly those two things for a made-up vendor "acme" (device plugin resource
`acme.com/gpu`, its own wire DeviceKind), and runs the agent's report builder and the scorer's ingest on the
copy in a fresh interpreter: nothing else in the copy is edited, so any other module that would need to learn
the vendor makes this test fail.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import accelscore

PACKAGE = Path(accelscore.__file__).parent
TABLE_END = "VENDORS: tuple[Vendor, ...] = (NVIDIA, AMD, GOOGLE_TPU)"

ROW = '''
ACME = Vendor(
    name="acme", family=AcceleratorFamily.GPU, collector="acme", device_kind=9, resource="acme.com/gpu",
    resources=((r"acme\\.com/gpu", ResourceRole.WHOLE),), collector_module="acme",
)
VENDORS: tuple[Vendor, ...] = (NVIDIA, AMD, GOOGLE_TPU, ACME)'''

COLLECTOR = '''
"""The acme collector: its library's devices as Accelerator records (a test vendor)."""

from dataclasses import dataclass

from accelscore.agent.collectors.base import Reading, timed_reading
from accelscore.devices import Accelerator, Health


@dataclass(frozen=True)
class AcmeSnapshot:
    accelerators: tuple[Accelerator, ...]


class AcmeCollector:
    name = "acme"

    def __init__(self, library):
        self._library = library

    def collect(self) -> Reading[AcmeSnapshot]:
        return timed_reading(self.name, lambda: AcmeSnapshot(tuple(
            Accelerator(kind=9, id=uid, index=i, model="Acme X1", health=Health.HEALTHY,
                        memory_total_bytes=64 << 30, memory_used_bytes=0)
            for i, uid in enumerate(self._library.devices()))))

    def close(self) -> None:
        pass


def build_collector(*, host, library, advertised):
    return AcmeCollector(library)
'''

SCRIPT = '''
import json, time
from accelscore.agent import app
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.report import build_report
from accelscore.agent.runner import Cycle
from accelscore.agent.snapshots import DeviceAssignment, KubeletSnapshot
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable, ReportRefused
from accelscore.scorer.ingest.skew import unknown_items

class Library:
    def devices(self):
        return ["ACME-0", "ACME-1", "ACME-2", "ACME-3"]

built = app.vendor_collectors(None, libraries={"acme": Library()}, advertised=lambda r: (lambda: True))
(acme,) = [c for c in built if c.name == "acme"]
held = DeviceAssignment("acme.com/gpu", "ACME-2", "ACME-2", "ml", "train", "main")
readings = {"kubelet": Reading("kubelet", State.OK, data=KubeletSnapshot(assignments=(held,), allocatable=())),
            "acme": acme.collect()}
report = build_report(Cycle(1, readings, time.time()), node_name="n1", sequence=1, instance="i", now=time.time())
import accelscore
out = {"unknown": [list(x) for x in unknown_items(report)], "package": accelscore.__file__}
table = NodeTable(cluster="c1", config=default_scoring_config())
for name, advertised in (("fits", 4.0), ("liar", 2.0)):
    table.set_nodes({"n1": NodeFacts("n1", True, capacity={"acme.com/gpu": advertised},
                                     allocatable={"acme.com/gpu": advertised})})
    try:
        s = table.accept(report, time.time())
        out[name] = [s.gpu_total, s.gpu_healthy, s.gpu_free]
    except ReportRefused as refused:
        out[name] = refused.rejection.message
table.set_nodes({"n1": NodeFacts("n1", True, capacity={"acme.com/gpu": 4.0}, allocatable={"acme.com/gpu": 4.0})})
table.accept(report, time.time())
usage, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
out["gpuClusterFree"] = accel.raw["gpuClusterFree"]
print(json.dumps(out))
'''


def test_a_new_vendor_is_one_collector_module_and_one_table_row(tmp_path: Path) -> None:
    copy = tmp_path / "accelscore"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "devices" / "vendors.py"
    text = table.read_text(encoding="utf-8")
    assert text.count(TABLE_END) == 1, "the vendor table's last line moved: update this test"
    table.write_text(text.replace(TABLE_END, ROW), encoding="utf-8")
    (copy / "agent" / "collectors" / "acme.py").write_text(textwrap.dedent(COLLECTOR), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert Path(out["package"]).is_relative_to(tmp_path)  # the copy ran, not the installed package
    assert out["unknown"] == []  # the scorer knows the collector and the kind from the row alone
    assert out["fits"] == [4, 4, 3]  # 4 healthy, one held through acme.com/gpu: 3 free
    assert "acme.com/gpu" in out["liar"]  # 4 devices against a Node advertising 2: refused by acme's resource
    assert out["gpuClusterFree"] == 3
