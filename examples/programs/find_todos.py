# Find TODO markers with grep and group them by file.
import collections

found = await tools.grep({"pattern": r"TODO\b", "dir": "."})
per_file = collections.Counter(match["path"] for match in found["matches"])
for path, count in sorted(per_file.items()):
    print(f"{path}: {count} TODO(s)")
first = found["matches"][0] if found["matches"] else None
return {"total": sum(per_file.values()), "first": first and f'{first["path"]}:{first["line"]}'}
