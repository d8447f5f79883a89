# Bound a slow call with asyncio.wait_for and fall back when it takes too long.
import asyncio

try:
    await asyncio.wait_for(tools.sleep({"ms": 2000}), timeout=0.05)
    outcome = "finished"
except asyncio.TimeoutError:
    outcome = "gave up after 50 ms"
print(outcome)
quick = await asyncio.wait_for(tools.sleep({"ms": 5}), timeout=5)
return {"slow": outcome, "quick_ms": quick["slept_ms"]}
