"""nbval (written against 0.11.0): the notebook collector the test plugin extends.

nbval has no public extension API. ``fencecheck.pytest_plugin`` subclasses ``IPyNbFile``
(relying on its ``kernel``, ``setup_sanitize_files()``, ``timed_out``)
and ``IPyNbCell`` (its ``cell``, ``test_outputs``); the default of
``--nbval-cell-timeout`` means "not given"; ``keep_history`` patches ``RunningKernel.kc``.
"""
from __future__ import annotations

import inspect

from nbval.plugin import IPyNbCell, IPyNbFile

__all__ = ["IPyNbCell", "IPyNbFile", "DEFAULT_CELL_TIMEOUT", "keep_history", "check"]

#: nbval's default for --nbval-cell-timeout: the option was not given.
DEFAULT_CELL_TIMEOUT = 2000


def keep_history(kernel) -> None:
    """Make ``kernel.execute_cell_input`` store the input in IPython's history when
    ``kernel.keeps_history`` is true, as a notebook does: nbval's ``store_history=False``
    lets a trailing ``;`` show the cell's value and leaves the cell uncounted."""
    kernel.keeps_history = False

    def execute_cell_input(cell_input, allow_stdin=None):
        return kernel.kc.execute(cell_input, store_history=kernel.keeps_history,
                                 allow_stdin=allow_stdin, stop_on_error=False)

    kernel.execute_cell_input = execute_cell_input


def check() -> None:
    """Fail, naming it, if a piece the plugin relies on is gone."""
    for name in ("setup_sanitize_files", "setup", "teardown", "collect"):
        assert callable(getattr(IPyNbFile, name, None)), f"nbval: IPyNbFile.{name} is gone"
    init = inspect.getsource(IPyNbFile.__init__)
    assert "self.timed_out" in init, "nbval: IPyNbFile.__init__ no longer sets self.timed_out"
    assert "self.kernel" in inspect.getsource(IPyNbFile.setup), \
        "nbval: IPyNbFile.setup no longer sets self.kernel"
    params = list(inspect.signature(IPyNbCell.__init__).parameters)
    assert params[:6] == ["self", "name", "parent", "cell_num", "cell", "options"], \
        f"nbval: IPyNbCell.__init__ takes {params}"
    assert "self.test_outputs" in inspect.getsource(IPyNbCell), \
        "nbval: IPyNbCell no longer records test_outputs"
    from nbval.kernel import RunningKernel

    source = inspect.getsource(RunningKernel)
    assert "self.kc" in source and "store_history=False" in source, \
        "nbval: RunningKernel no longer sends cells through self.kc with store_history=False"
    import nbval.plugin

    source = inspect.getsource(nbval.plugin.pytest_addoption)
    assert f"default={DEFAULT_CELL_TIMEOUT}" in source, \
        "nbval: --nbval-cell-timeout has another default"
