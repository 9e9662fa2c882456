"""The aiokafka round trip the security conformance tests share: produce values, read them back."""
from __future__ import annotations

import asyncio
from typing import Any


def aiokafka_round_trip(topic: str, values: list[bytes], timeout: float = 60, **common: Any) -> list[bytes]:
    """Produce `values` to `topic` (acks=all) with aiokafka, then consume as many in a group of its own
    from the earliest offset; `common` are the connection settings of both clients (bootstrap,
    security protocol, SASL or SSL context). Returns what was read, in order."""
    import aiokafka

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            for value in values:
                await producer.send(topic, value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(timeout):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == len(values):
                        break
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())
