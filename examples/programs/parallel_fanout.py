# Fan out independent, concurrency-safe calls with asyncio.gather: they overlap instead of queueing.
import asyncio

words = ["alpha", "beta", "gamma", "delta", "epsilon"]
replies = await asyncio.gather(*[tools.echo({"text": word.upper()}) for word in words])
naps = await asyncio.gather(*[tools.sleep({"ms": 20}) for _ in range(10)])
print("echoed:", ", ".join(reply["text"] for reply in replies))
print("naps:", sum(nap["slept_ms"] for nap in naps), "ms of sleeping in total")
return [reply["text"] for reply in replies]
