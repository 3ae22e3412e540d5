"""The new scorer options: startup grace, leader election and its one-line errors."""

from __future__ import annotations

import argparse

import pytest

from accelscore.errors import ConfigError, StartupError
from accelscore.options import add_options, resolve
from accelscore.scorer.cli import _elector_factory
from accelscore.scorer.config import SCORER_OPTIONS, ScorerConfig, scorer_config_from
from accelscore.scorer.ha.elector import LeaderElector
from tests.kubeapi.fixtures import ApiHandle


def _config(argv: list[str], environ: dict[str, str]) -> ScorerConfig:
    parser = argparse.ArgumentParser()
    add_options(parser, SCORER_OPTIONS)
    return scorer_config_from(resolve(parser.parse_args(argv), SCORER_OPTIONS, environ=environ))


def test_leader_election_takes_namespace_and_identity_from_the_downward_api() -> None:
    config = _config(["--leader-elect", "--startup-grace", "25"], {"POD_NAMESPACE": "ns", "POD_NAME": "scorer-x"})
    assert (config.ha.leader_elect, config.process.namespace, config.ha.leader_identity, config.ha.lease_name,
            config.ha.startup_grace_s) == (True, "ns", "scorer-x", "accelscore-scorer", 25.0)


def test_leader_election_without_a_namespace_is_one_line() -> None:
    with pytest.raises(ConfigError, match="POD_NAMESPACE is empty"):
        _config(["--leader-elect"], {})


def test_a_negative_startup_grace_is_refused() -> None:
    with pytest.raises(ConfigError, match="ACCELSCORE_STARTUP_GRACE"):
        _config([], {"ACCELSCORE_STARTUP_GRACE": "-1"})


@pytest.mark.anyapi
def test_the_cli_builds_an_elector_on_the_lease_only_when_asked(kube_api: ApiHandle) -> None:
    assert _elector_factory(_config([], {}), None) is None
    elect = _config(["--leader-elect"], {"POD_NAMESPACE": "default", "POD_NAME": "a"})
    with pytest.raises(StartupError, match="needs the cluster's API"):
        _elector_factory(elect, None)
    elector = _elector_factory(elect, kube_api.api_client())(lambda _leading: None)
    assert isinstance(elector, LeaderElector) and elector.identity == "a"
    elector.round()  # creates the Lease and leads
    assert elector.is_leader()
