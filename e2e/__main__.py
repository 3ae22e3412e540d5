"""`python -m e2e up [--no-node | --apiservers-only] | down | check [--plant NAME] [CHECK...] |
run [--plant NAME] [CHECK...] | realapi [PYTEST-ARG...]` (e2e/README.md)."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from types import FrameType

from e2e import realapi
from e2e.rig import lifecycle, plants, procs
from e2e.rig.config import Config


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM/SIGHUP as an exception, so every `finally` (the teardown) runs."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    from e2e.checks import CHECKS, run_checks

    parser = argparse.ArgumentParser(prog="python -m e2e", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="bring the rig up and leave it running (kubeconfigs in the state directory)")
    up.add_argument("--no-node", action="store_true", help="hub + managed cluster (joined) only: no kubelet")
    up.add_argument("--apiservers-only", action="store_true",
                    help="the two apiservers (OCM's CRDs on the hub) and controller-managers: no OCM, no node")
    sub.add_parser("down", help="stop everything the rig started; unmount what it mounted")
    for name, text in (("check", "run checks against the running rig"),
                       ("run", "up, the checks, down (always): what `make e2e` runs")):
        p = sub.add_parser(name, help=text)
        p.add_argument("checks", nargs="*", metavar="CHECK", help=f"some of {', '.join(CHECKS)} (default: all)")
        p.add_argument("--plant", choices=sorted(plants.PLANTS), metavar="NAME",
                       help="apply a planted defect to the overlays (never to deploy/), to show the checks catch it: "
                            + plants.describe())
    sub.add_parser("realapi", help="up --apiservers-only, e2e/realapi-tests, down (always): make e2e-realapi; "
                   "the arguments after it go to pytest (-n 2, a module, -k ...)")
    args, extra = parser.parse_known_args(argv)
    if args.command != "realapi" and extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    cfg = Config.from_env()
    if getattr(args, "plant", None):
        cfg = dataclasses.replace(cfg, plant=args.plant)
        lifecycle.log(f"planted defect {args.plant}: {plants.plant(args.plant).what}")
    try:
        if args.command == "down":
            lifecycle.down(cfg)
            return 0
        if args.command == "up":
            try:
                lifecycle.up(cfg, with_node=not args.no_node, apiservers_only=args.apiservers_only)
            except BaseException:
                lifecycle.down(cfg)
                raise
            print(f"export KUBECONFIG={cfg.managed_kubeconfig} HUB_KUBECONFIG={cfg.hub_kubeconfig}")
            return 0
        if args.command == "realapi":
            return realapi.run(cfg, extra[1:] if extra[:1] == ["--"] else extra)
        if args.command == "check":
            return run_checks(cfg, args.checks)
        t0 = time.monotonic()
        try:
            lifecycle.up(cfg)
            return run_checks(cfg, args.checks)
        finally:
            lifecycle.down(cfg)
            lifecycle.log(f"total {time.monotonic() - t0:.0f} s")
    except procs.RigError as err:
        print(f"e2e: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
