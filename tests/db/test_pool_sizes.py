"""How a worker's connections are split, and each worker's share of the server's."""

from __future__ import annotations

import pytest

from registry.db.engine import SPARE_CONNECTIONS, PoolSizes, per_worker


@pytest.mark.parametrize("connections", [3, 4, 10, 23, 31, 93, 500])
def test_a_worker_never_opens_more_than_its_share(connections: int) -> None:
    sizes = PoolSizes.within(connections)
    assert sizes.total == connections
    assert sizes.orm >= 1 and sizes.reads >= 1 and sizes.overflow == 0


@pytest.mark.parametrize("workers", [1, 2, 4, 8, 16])
def test_workers_together_stay_under_max_connections(workers: int) -> None:
    each = per_worker(200, 3, workers)
    assert workers * PoolSizes.within(each).total <= 200 - 3 - SPARE_CONNECTIONS


def test_too_many_workers_is_an_error_that_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="use fewer workers or raise max_connections"):
        per_worker(200, 3, 64)
