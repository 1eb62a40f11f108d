"""The verifier: reads, lints, runs, builds and records the book (``chapter``, ``lint``,
``pytest_plugin``, ``sphinx``, ``record``, ``cachekey``...); nothing a chapter imports, which
is the ``fences`` package."""
