"""The harness's own applies survive kubectl's OpenAPI read timing out on a loaded apiserver, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.rig.kube import APPLY_TRIES, Kubectl, KubectlError

TIMEOUT = ('error: error validating "STDIN": error validating data: Get "https://127.0.0.1:29042/openapi/v2?'
           'timeout=32s": context deadline exceeded (Client.Timeout exceeded while awaiting headers)')


def fake_kubectl(tmp_path: Path, failures: int, stderr: str) -> tuple[Kubectl, Path]:
    """A kubectl that fails its first `failures` calls with `stderr`; each call's argv is one line of the log."""
    log, binary = tmp_path / "calls", tmp_path / "kubectl"
    binary.write_text(f"""#!/bin/sh
echo "$*" >> {log}
cat > {tmp_path / "stdin"}
[ "$(wc -l < {log})" -gt {failures} ] && exit 0
echo '{stderr}' >&2
exit 1
""")
    binary.chmod(0o755)
    return Kubectl(tmp_path / "kubeconfig", "test", binary), log


def test_an_openapi_timeout_is_tried_again(tmp_path: Path) -> None:
    k, log = fake_kubectl(tmp_path, APPLY_TRIES - 1, TIMEOUT)
    k.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}])
    assert (tmp_path / "stdin").read_text() == '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}\n'
    assert log.read_text().splitlines() == [
        f"--kubeconfig {tmp_path / 'kubeconfig'} apply --server-side --force-conflicts -f -"] * APPLY_TRIES


def test_objects_go_as_a_stream_never_a_list(tmp_path: Path) -> None:
    """A `kind: List` is validated client-side against all of /openapi/v2; a stream, by the apiserver per object."""
    k, _ = fake_kubectl(tmp_path, 0, "")
    k.apply([{"kind": "Namespace", "metadata": {"name": n}} for n in ("a", "b")])
    sent = [json.loads(line) for line in (tmp_path / "stdin").read_text().splitlines()]
    assert [doc["metadata"]["name"] for doc in sent] == ["a", "b"]


def test_it_gives_up_after_the_last_try(tmp_path: Path) -> None:
    k, log = fake_kubectl(tmp_path, APPLY_TRIES, TIMEOUT)
    with pytest.raises(KubectlError, match="openapi/v2"):
        k.apply("{}")
    assert len(log.read_text().splitlines()) == APPLY_TRIES


def test_any_other_failure_is_not(tmp_path: Path) -> None:
    k, log = fake_kubectl(tmp_path, 1, 'The Namespace "X" is invalid: metadata.name: Invalid value')
    with pytest.raises(KubectlError, match="is invalid"):
        k.apply("{}")
    assert len(log.read_text().splitlines()) == 1
