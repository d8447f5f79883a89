# Keep a plan with todo_write: each call replaces the whole list (last write wins).
from typing import Any

steps = ["read the notes", "write the summary", "review the summary"]
plan: list[Any] = [{"content": step, "status": "pending"} for step in steps]
plan[0]["status"] = "in_progress"
first = await tools.todo_write({"todos": plan})
print("started:", first["counts"])
plan = [dict(item, status="completed") for item in plan[:2]] + [dict(plan[2], status="in_progress")]
second = await tools.todo_write({"todos": plan})
print("later:", second["counts"])
return second["counts"]
