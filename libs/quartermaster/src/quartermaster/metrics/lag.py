"""How far each consumer of the log is behind its end: read at scrape time.

Every service folds the same log; a consumer that falls behind answers reads
late and decides late. The gauge is the stream's last sequence less the
position each consumer has applied (folded, or committed for the projector).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from quartermaster.metrics.onloop import LoopCollector

Positions = Callable[[], Mapping[str, int]]


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            "quartermaster_log_consumer_lag_messages",
            "Messages on the log that a consumer has not applied yet",
            labels=["consumer"],
        ),
        GaugeMetricFamily(
            "quartermaster_log_last_sequence", "Sequence of the newest message on the log"
        ),
    )


class LogLagCollector(LoopCollector):
    """`positions()`: consumer name -> applied position, for the consumers running now."""

    def __init__(self, last_seq: Callable[[], Awaitable[int]], positions: Positions) -> None:
        super().__init__()
        self._last_seq = last_seq
        self._positions = positions

    def describe(self) -> Iterable[Metric]:
        return list(_families())

    async def families(self) -> list[Metric]:
        lag, last = _families()
        end = await self._last_seq()
        last.add_metric([], end)
        for consumer, position in sorted(self._positions().items()):
            lag.add_metric([consumer], max(0, end - position))
        return [lag, last]
