"""Everything the book borrows from other packages beyond their public API: one module per
package, each naming the version it was written against, with a ``check()`` that fails,
naming the missing piece, when the package changes shape (``tests/test_upstream.py``).
"""
