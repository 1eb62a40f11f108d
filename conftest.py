"""Every MyST chapter in book/ runs as an nbval notebook, one test per fence.

The collector, the global-state guard and the per-fence results live in
fences/pytest_plugin.py; see its docstring.
"""
pytest_plugins = ["fences.pytest_plugin"]
collect_ignore = ["_build", ".venv"]
