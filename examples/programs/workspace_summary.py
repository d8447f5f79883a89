# Summarise a workspace: list every file, read the text ones in parallel, report line and word counts.
import asyncio

listing = await tools.list_files({"dir": "."})
paths = [path for path in listing["files"] if path.endswith((".md", ".txt", ".py"))]
documents = await asyncio.gather(*[tools.read_text({"path": path}) for path in paths])
rows = []
for document in documents:
    text = document["text"]
    rows.append((document["path"], len(text.splitlines()), len(text.split())))
for path, lines, words in rows:
    print(f"{path}: {lines} lines, {words} words")
return {"files": len(rows), "words": sum(words for _, _, words in rows)}
