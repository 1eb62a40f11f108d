"""Everything the book borrows from other packages beyond their public API.

One module per upstream package. Each names the version it was written
against and why it reaches inside, and has a ``check()`` that fails loudly,
naming the missing piece, when the upstream changes shape;
``tests/test_upstream.py`` runs every ``check()``. Nothing outside this
package imports a private name of nbval, myst-nb, jupyter-cache or the theme.
"""
