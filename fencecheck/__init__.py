"""The verifier: everything that checks, builds and records the book, and nothing a
chapter imports.

The reader's runtime is the ``fences`` package (what a chapter's code imports, and
all the wheel the site ships holds). This package reads chapters and runs them:

- ``chapter``: the one reader of a chapter (myst-nb's, configured as the build).
- ``lint``: the book standard's checks on a chapter's cells.
- ``pytest_plugin``: ``make test``'s collector, one test per fence.
- ``sphinx``: the site build's extension (``make book``).
- ``record``: the per-release record of every fence (``make matrix``).
- ``mutation``, ``verified``: the pages that show mutation and release results.
- ``cachekey``: the execution cache's key (torch, the runtime, the packages).
- ``jupyter``: the downloaded notebook, as Jupyter Markdown.
- ``upstream``: all that is borrowed from other packages beyond their public API.
"""
