"""The small kube modules answer with our own types: library errors never leave accelscore.kube."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from accelscore import kube
from accelscore.kube.quantity import InvalidQuantity, quantity
from accelscore.kube.tokenreview import TokenReviewResult, TokenReviews
from tests.kubeapi import ApiHandle


@pytest.mark.parametrize(("status", "expected"), [(500, kube.Retryable), (403, kube.Forbidden),
                                                  (401, kube.Unauthorized)], ids=["500", "403", "401"])
def test_a_failed_token_review_is_a_kube_error_with_the_library_error_as_cause(
        kube_test_server: ApiHandle, status: int, expected: type[kube.KubeError]) -> None:
    assert kube_test_server.server is not None
    kube_test_server.server.inject("POST", "tokenreviews", status)
    with pytest.raises(kube.KubeError) as err:
        TokenReviews(kube_test_server.api_client()).review("a.b.c", audience="accelscore")
    assert type(err.value) is expected and not isinstance(err.value, ApiException)
    assert isinstance(err.value.__cause__, ApiException)


def test_an_unknown_token_is_an_answer_not_an_error(kube_test_server: ApiHandle) -> None:
    result = TokenReviews(kube_test_server.api_client()).review("not-a-token", audience="accelscore")
    assert isinstance(result, TokenReviewResult) and not result.authenticated


def test_a_missing_pod_is_not_found(kube_test_server: ApiHandle) -> None:
    with pytest.raises(kube.NotFound):
        TokenReviews(kube_test_server.api_client()).node_of_pod(namespace="default", pod="no-such-pod")


def test_an_unreachable_api_server_is_retryable() -> None:
    cfg = client.Configuration(host="http://127.0.0.1:9")
    cfg.retries = 0
    with client.ApiClient(cfg) as api, pytest.raises(kube.Retryable) as err:
        TokenReviews(api, request_timeout_s=2).review("a.b.c", audience="accelscore")
    assert err.value.__cause__ is not None


@pytest.mark.parametrize("value", ["12x", "-1", "1e30"], ids=["not-a-quantity", "negative", "beyond-int64"])
def test_a_bad_quantity_is_our_invalid_quantity_naming_the_field(value: str) -> None:
    with pytest.raises(InvalidQuantity) as err:
        quantity(value, "status.allocatable.cpu")
    assert err.value.field == "status.allocatable.cpu"
