# The smallest useful program: call two demo tools and return a value.
reply = await tools.echo({"text": "hello from codemode"})
print(reply["text"])
total = await tools.add(a=2, b=3)
return {"echoed": reply["text"], "sum": total["sum"]}
