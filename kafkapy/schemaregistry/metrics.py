"""The schema registry's metric families on the broker's /metrics (prometheus-client is imported
here only when the metrics endpoint asks)."""
from __future__ import annotations

from .server import LATENCY_BUCKETS_MS

__all__ = ["registry_families"]


def registry_families(service) -> list:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    registry, server, store = service.registry, service.server, service.store
    out = []
    subjects = GaugeMetricFamily("kafkapy_schema_registry_subjects", "Subjects with at least one version that is "
                                 "not deleted")
    subjects.add_metric([], len(registry.subject_list()))
    out.append(subjects)
    schemas = GaugeMetricFamily("kafkapy_schema_registry_schemas", "Schema ids known (distinct schemas)")
    schemas.add_metric([], len(registry.schemas))
    out.append(schemas)
    versions = GaugeMetricFamily("kafkapy_schema_registry_versions", "Subject versions, by soft-deleted or not",
                                 labels=["deleted"])
    counts = {False: 0, True: 0}
    for subject_versions in registry.subjects.values():
        for version in subject_versions.values():
            counts[version.deleted] += 1
    for deleted, count in counts.items():
        versions.add_metric([str(deleted).lower()], count)
    out.append(versions)
    max_id = GaugeMetricFamily("kafkapy_schema_registry_max_schema_id", "The highest schema id handed out")
    max_id.add_metric([], registry.max_id)
    out.append(max_id)
    position = GaugeMetricFamily("kafkapy_schema_registry_store_position", "Next offset of the schemas topic the "
                                 "registry applies")
    position.add_metric([], store.position)
    out.append(position)
    for name, key, text in (("registrations", "registered", "Schema versions registered by this broker"),
                            ("lookups", "lookups", "Lookups (POST /subjects/{subject})"),
                            ("incompatible", "incompatible", "Registrations refused as incompatible (409)")):
        family = CounterMetricFamily(f"kafkapy_schema_registry_{name}", text)
        family.add_metric([], registry.counters[key])
        out.append(family)
    errors = CounterMetricFamily("kafkapy_schema_registry_error_responses", "Error answers by HTTP status",
                                 labels=["status"])
    for status, count in sorted(server.errors.items()):
        errors.add_metric([str(status)], count)
    out.append(errors)
    latency = HistogramMetricFamily("kafkapy_schema_registry_request_latency_seconds",
                                    "Time to answer a registry request, by method and route", labels=["route"])
    for route, (count, total, buckets) in sorted(server.latency.items()):
        latency.add_metric([route], [(str(bound / 1000), cumulative) for bound, cumulative in
                                     zip(LATENCY_BUCKETS_MS, _cumulative(buckets))] + [("+Inf", count)], total)
    out.append(latency)
    return out


def _cumulative(buckets: list[int]) -> list[int]:
    # the middleware counts a request in every bucket whose bound it is under: already cumulative
    return list(buckets)
