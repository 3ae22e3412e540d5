"""The scorer's DSF flags (docs/dsf.md): off unless `--dsf-address` is set."""

from __future__ import annotations

from accelscore.options import Option, positive_int, text

DEFAULT_NAME = "accelscore_dsf"  # DSF's APS is this with dashes: accelscore-dsf, none of accelscore's own names

OPTIONS = (
    Option("--dsf-address", "ACCELSCORE_DSF_ADDRESS", text, "",
           "HOST:PORT to answer the Dynamic Scoring Framework's /healthz, /config and /scoring on (empty: off)"),
    Option("--dsf-url", "ACCELSCORE_DSF_URL", text, "",
           "the base URL DSF's agent reaches this scorer at (default: http://HOST:PORT of --dsf-address)"),
    Option("--dsf-name", "ACCELSCORE_DSF_NAME", text, DEFAULT_NAME,
           "the DSF score name (its AddOnPlacementScore; must not be one of accelscore's own)"),
    Option("--dsf-interval", "ACCELSCORE_DSF_INTERVAL", positive_int, "30",
           "seconds between DSF scoring rounds, as the config document says"),
)
