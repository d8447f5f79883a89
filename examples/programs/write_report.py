# Read notes, write a report file, read it back to check it.
notes = await tools.read_text({"path": "docs/notes.md"})
headings = [line.lstrip("# ").strip() for line in notes["text"].splitlines() if line.startswith("#")]
report = "Report\n" + "\n".join(f"- {heading}" for heading in headings) + "\n"
written = await tools.write_text({"path": "out/report.txt", "text": report})
check = await tools.read_text({"path": "out/report.txt"})
print(check["text"], end="")
return {"bytes": written["bytes"], "headings": len(headings)}
