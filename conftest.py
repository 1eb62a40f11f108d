"""Every MyST chapter in book/ runs as an nbval notebook, one test per fence.

The collector, the global-state guard and the per-fence results live in
fencecheck/pytest_plugin.py; see its docstring.
"""
pytest_plugins = ["fencecheck.pytest_plugin"]
collect_ignore = ["_build", ".venv"]
