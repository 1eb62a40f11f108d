pytest_plugins = ["pytester"]


def pytest_terminal_summary(terminalreporter, config):
    """Say whether the must-fail corpus ran in this session or its proof was reused."""
    if getattr(config, "cache", None) is None:  # -p no:cacheprovider
        return
    used = config.cache.get("fences/corpus-proof-used", None)
    if used and not hasattr(config, "workerinput"):
        terminalreporter.write_line(f"must-fail corpus: {used} (FENCES_REUSE_OUTCOMES=1 reuses it)")
        config.cache.set("fences/corpus-proof-used", None)
