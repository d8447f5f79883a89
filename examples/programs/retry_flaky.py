# Retry a call that may fail, with a growing pause, and report how many attempts it took.
import asyncio

attempts = []


async def flaky(attempt):
    # The first two attempts ask the demo `fail` tool to fail; the third succeeds through `echo`.
    if attempt < 3:
        return await tools.fail({"message": f"attempt {attempt} failed"})
    return await tools.echo({"text": f"attempt {attempt} succeeded"})


for attempt in range(1, 6):
    try:
        reply = await flaky(attempt)
        attempts.append(reply["text"])
        break
    except ToolCallError as error:
        attempts.append(f"{error.code}: {error}")
        await asyncio.sleep(0.01 * attempt)
print("\n".join(attempts))
return {"attempts": len(attempts)}
