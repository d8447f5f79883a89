# Exclusive tools are barriers: even under gather they run one at a time, in submission order.
import asyncio

results = await asyncio.gather(*[tools.counter_increment({"by": step}) for step in (1, 2, 3, 4)])
values = [result["value"] for result in results]
print("counter after each call:", values)
return values[-1]
