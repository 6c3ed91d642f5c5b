"""The serve ledger's counts as OpenTelemetry metrics, pushed over OTLP/HTTP (opt-in:
``REGISTRY_USAGE_OTLP_ENDPOINT``, with the ``otlp`` extra installed).

Each flush of the ledger adds its counts to one counter, ``registry.usage.answers``, with the
tenant's slug, the kind, name, version, label and surface as attributes (never the caller or the
client: a metrics backend is not the place for every key), and pushes them at once, as deltas, in a
thread (the exporter's HTTP client blocks). The OpenTelemetry SDK bounds the attribute sets it holds
(past its limit, answers are summed under its overflow attribute). ``/metrics`` (Prometheus) carries
no per-prompt label at all."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from registry.usage import repository
from registry.usage.ledger import Counts

logger = logging.getLogger("registry.usage")
EXPORT_TIMEOUT_MILLIS = 10_000


class OtlpExport:
    """One worker's exporter: a meter provider whose reader pushes only when told (each flush)."""

    def __init__(self, endpoint: str, pool: Callable[[], Any], worker: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import Counter, MeterProvider
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource

        exporter = OTLPMetricExporter(
            endpoint=endpoint,
            timeout=EXPORT_TIMEOUT_MILLIS / 1000,
            preferred_temporality={Counter: AggregationTemporality.DELTA},
        )
        # Pushed by ``export`` after each flush; the reader's own timer is a day (a fallback).
        self.reader = PeriodicExportingMetricReader(exporter, export_interval_millis=86_400_000)
        resource = Resource.create(
            {"service.name": "prompt-registry", "service.instance.id": worker}
        )
        self.provider = MeterProvider(resource=resource, metric_readers=[self.reader])
        meter = self.provider.get_meter("registry.usage")
        self.answers = meter.create_counter(
            "registry.usage.answers",
            unit="{answer}",
            description="Answers served, by tenant, kind, name, version, label and surface",
        )
        self.pool = pool
        self.slugs: dict[int, str] = {}

    async def export(self, counts: Counts) -> None:
        """Add a flushed batch to the counter and push it."""
        totals: dict[tuple[Any, ...], int] = {}
        for (key, _minute), counter in counts.items():
            group = (key.tenant, key.kind, key.name, key.version, key.label, key.surface)
            totals[group] = totals.get(group, 0) + int(counter[0])
        await self._learn_slugs({group[0] for group in totals})
        for (tenant, kind, name, version, label, surface), answers in totals.items():
            self.answers.add(
                answers,
                {
                    "registry.tenant": self.slugs.get(tenant, str(uuid.UUID(int=tenant))),
                    "registry.kind": kind,
                    "registry.name": name,
                    "registry.version": version,
                    "registry.label": label,
                    "registry.surface": surface,
                },
            )
        pushed = await asyncio.to_thread(self.provider.force_flush, EXPORT_TIMEOUT_MILLIS)
        if not pushed:
            logger.warning("usage_otlp_export_failed", extra={"fields": {"groups": len(totals)}})

    async def _learn_slugs(self, tenants: set[int]) -> None:
        unknown = [uuid.UUID(int=t) for t in tenants if t not in self.slugs]
        if not unknown:
            return
        if len(self.slugs) > 100_000:
            self.slugs.clear()
        async with (await self.pool()).acquire() as conn:
            for tenant_id, slug in await repository.slugs(conn, unknown):
                self.slugs[tenant_id.int] = slug

    async def close(self) -> None:
        await asyncio.to_thread(self.provider.shutdown, EXPORT_TIMEOUT_MILLIS)
