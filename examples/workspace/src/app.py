def greet(name: str) -> str:
    # TODO: localise the greeting
    return f"Hello, {name}!"
