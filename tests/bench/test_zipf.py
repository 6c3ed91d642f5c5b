"""bench/zipf's model of what a worker could answer from memory: a request is from memory only when
its worker was asked for the same prompt before, so a first ask never is, whatever the cache."""

from __future__ import annotations

from pathlib import Path

from bench.zipf import cdf, replay


def _targets(tmp_path: Path, tenants: int, prompts: int) -> Path:
    path = tmp_path / "targets.tsv"
    path.write_text(
        "".join(f"/mcp/t{t}\tp{p}\t{{}}\n" for t in range(tenants) for p in range(prompts))
    )
    return path


def _results(workload: str, rps: float) -> dict[str, object]:
    row = {"workload": workload, "connections": 16, "rps": rps, "hit_ratio": 0.5}
    return {"workers": 2, "warmup_s": 0, "duration_s": 1, "wrk": [row]}


def test_the_zipf_law_is_the_load_generators() -> None:
    shares = cdf(4)
    assert shares[-1] == 1.0
    assert [round(b - a, 4) for a, b in zip([0.0, *shares], shares, strict=False)] == [
        round(1 / k / (1 + 1 / 2 + 1 / 3 + 1 / 4), 4) for k in range(1, 5)
    ]


def test_first_asks_bound_what_any_cache_answers(tmp_path: Path) -> None:
    small = replay(_results("prompts/get", 2_000), _targets(tmp_path, 2, 3), 1, seed=1)[0]
    assert small["requests"] == 2_000
    assert small["bound"] >= 1 - 12 / 2_000  # six prompts, each asked first once per worker
    assert small["lru"] < 0.5  # one prompt kept per worker: most requests find another
    large = replay(
        _results("prompts/get (Zipf mix)", 2_000), _targets(tmp_path, 50, 200), 20_000, 1
    )
    assert large[0]["lru"] == large[0]["bound"]  # a cache as large as the dataset is the bound
    assert large[0]["bound"] < 0.9  # 10,000 prompts and 2,000 requests: many first asks
