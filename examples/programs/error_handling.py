# A failed call raises ToolCallError; branch on its machine-readable code and carry on.
from typing import Any

calls: list[tuple[Any, dict[str, Any]]] = [
    ("fail", {"message": "disk full"}), ("add", {"a": 1}), ("echo", {"text": "still here"})]
outcomes = []
for name, args in calls:
    try:
        result = await tools[name](args)
        outcomes.append(f"{name}: ok {result}")
    except ToolCallError as error:
        outcomes.append(f"{error.tool_name}: {error.code}")
for line in outcomes:
    print(line)
return len(outcomes)
