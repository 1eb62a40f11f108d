"""nbval (written against 0.11.0): the notebook collector the test plugin extends.

nbval has no public extension API. ``fencecheck.pytest_plugin`` subclasses its
collector ``IPyNbFile`` and item ``IPyNbCell`` and relies on these
attributes of them:

- ``IPyNbFile.kernel`` (the running kernel; the plugin shares one between
  chapters), ``IPyNbFile.setup_sanitize_files()`` (what ``setup`` does
  besides starting the kernel), ``IPyNbFile.timed_out``,
  ``IPyNbFile.compare_outputs`` (False: outputs are never compared);
- ``IPyNbCell.cell`` and ``IPyNbCell.test_outputs`` (the cell's outputs
  after ``runtest``);
- ``--nbval-cell-timeout``'s default, 2000, meaning "not given".
"""
from __future__ import annotations

import inspect

from nbval.plugin import IPyNbCell, IPyNbFile

__all__ = ["IPyNbCell", "IPyNbFile", "DEFAULT_CELL_TIMEOUT", "check"]

#: nbval's default for --nbval-cell-timeout: the option was not given.
DEFAULT_CELL_TIMEOUT = 2000


def check() -> None:
    """Fail, naming it, if a piece the plugin relies on is gone."""
    for name in ("setup_sanitize_files", "setup", "teardown", "collect"):
        assert callable(getattr(IPyNbFile, name, None)), f"nbval: IPyNbFile.{name} is gone"
    init = inspect.getsource(IPyNbFile.__init__)
    for attr in ("self.timed_out", "self.compare_outputs"):
        assert attr in init, f"nbval: IPyNbFile.__init__ no longer sets {attr}"
    assert "self.kernel" in inspect.getsource(IPyNbFile.setup), \
        "nbval: IPyNbFile.setup no longer sets self.kernel"
    params = list(inspect.signature(IPyNbCell.__init__).parameters)
    assert params[:6] == ["self", "name", "parent", "cell_num", "cell", "options"], \
        f"nbval: IPyNbCell.__init__ takes {params}"
    assert "self.test_outputs" in inspect.getsource(IPyNbCell), \
        "nbval: IPyNbCell no longer records test_outputs"
    import nbval.plugin

    source = inspect.getsource(nbval.plugin.pytest_addoption)
    assert f"default={DEFAULT_CELL_TIMEOUT}" in source, \
        "nbval: --nbval-cell-timeout has another default"
