# Handle results as they arrive with asyncio.as_completed (fastest first).
import asyncio

delays = [60, 10, 35]
finished = []
for next_done in asyncio.as_completed([tools.sleep({"ms": ms}) for ms in delays]):
    result = await next_done
    finished.append(result["slept_ms"])
print("finished in order:", finished)
return finished
