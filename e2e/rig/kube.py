"""kubectl against one of the rig's clusters, and the kubeconfigs the rig writes.

The kubectl is always the one `make e2e-build` builds at the apiservers' version (`Config.kubectl`), never one from
PATH: Debian's is v1.32, four minor versions behind the v1.36 apiservers (kubectl supports one either way), with an
older kustomize for `apply -k` (docs/e2e.md)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message carries its stderr."""


# Before it sends an object, `kubectl apply` asks the apiserver's OpenAPI v3 whether the object's kind takes
# server-side field validation; a `kind: List` never does, so kubectl validates it client-side against the whole
# /openapi/v2 document, which a loaded apiserver just given large CRDs (Kueue's) did not serve within kubectl's 32 s
# (`error validating data: Get ".../openapi/v2?timeout=32s": context deadline exceeded`, on every try). So the
# harness sends a stream of objects (each validated by the apiserver, strictly), and, as an OpenAPI v3 read can time
# out as well with nothing wrong in the objects, tries a server-side apply (idempotent) again then.
OPENAPI_TIMEOUT = re.compile(r"error validating data: Get \S*/openapi/v[23]\S*: (context deadline exceeded|net/http)")
APPLY_TRIES = 3


def write_kubeconfig(path: Path, *, server: str, ca: Path, name: str, token: str | None = None,
                     cert: Path | None = None, key: Path | None = None) -> Path:
    """A one-context kubeconfig (token or client certificate), the CA embedded so it can be copied anywhere."""
    user: dict[str, str] = {"token": token} if token else {
        "client-certificate-data": base64.b64encode(Path(str(cert)).read_bytes()).decode(),
        "client-key-data": base64.b64encode(Path(str(key)).read_bytes()).decode()}
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Kubectl:
    """kubectl (`binary`, the rig's own build) with one kubeconfig."""

    kubeconfig: Path
    name: str
    binary: Path

    def command(self, *args: str) -> list[str]:
        """The argv of one kubectl call with this kubeconfig."""
        return [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args]

    def run(self, *args: str, stdin: str | None = None, timeout_s: float = 120, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.command(*args), input=stdin, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
        if check and proc.returncode != 0:
            raise KubectlError(f"kubectl ({self.name}) {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def ok(self, *args: str, stdin: str | None = None) -> bool:
        return self.run(*args, stdin=stdin, check=False).returncode == 0

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def get(self, kind: str, name: str = "", namespace: str | None = None) -> Any | None:
        """The object, or None when it does not exist."""
        args = ["get", kind, *([name] if name else []), *(["-n", namespace] if namespace else []), "-o", "json"]
        proc = self.run(*args, check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr or "not found" in proc.stderr:
                return None
            raise KubectlError(f"kubectl ({self.name}) {' '.join(args)}: {proc.stderr.strip()}")
        return json.loads(proc.stdout)

    def items(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[Any]:
        args = ["get", kind, *(["-n", namespace] if namespace else ["-A"]), *(["-l", selector] if selector else [])]
        return list(self.json(*args).get("items", []))

    def apply(self, manifest: str | Sequence[dict[str, Any]], *, server_side: bool = True) -> None:
        """The rig's own objects (never a check's subject: those are applied as a user would, once); tried again when
        kubectl could not read the OpenAPI it validates with (OPENAPI_TIMEOUT)."""
        text = manifest if isinstance(manifest, str) else "".join(json.dumps(doc) + "\n" for doc in manifest)
        args = ["apply", *(["--server-side", "--force-conflicts"] if server_side else []), "-f", "-"]
        for attempt in range(1, APPLY_TRIES + 1):
            proc = self.run(*args, stdin=text, check=False)
            if proc.returncode == 0:
                return
            if not (server_side and OPENAPI_TIMEOUT.search(proc.stderr)) or attempt == APPLY_TRIES:
                raise KubectlError(f"kubectl ({self.name}) {' '.join(args)}: "
                                   f"{proc.stderr.strip() or proc.stdout.strip()}")
            print(f"e2e: kubectl ({self.name}) apply: OpenAPI read timed out, again ({attempt}/{APPLY_TRIES - 1})",
                  flush=True)

    def ready(self) -> bool:
        try:
            proc = self.run("get", "--raw", "/readyz", check=False, timeout_s=10)
        except subprocess.TimeoutExpired:  # a loaded machine: not ready yet, ask again
            return False
        return proc.returncode == 0 and proc.stdout.strip() == "ok"


def condition(obj: Any | None, kind: str) -> str | None:
    """The status ("True"/"False"/"Unknown") of condition `kind` of an object, or None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None
