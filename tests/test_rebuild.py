"""fences.rebuild: what keeps a rebuild after one edit quick changes no output."""
from __future__ import annotations

import gc
import types

import jinja2
import pytest

from fences import rebuild


def app_with(tmp_path, **builder):
    config = types.SimpleNamespace(nb_render_text_lexer="myst-ansi", nb_render_error_lexer="ipythontb")
    return types.SimpleNamespace(builder=types.SimpleNamespace(**builder), config=config,
                                 doctreedir=str(tmp_path / ".doctrees"))


def test_templates_are_compiled_once_across_builds(tmp_path):
    """A second build (a new environment) loads the compiled template from the cache."""
    loader = jinja2.DictLoader({"page.html": "{{ 1 + 1 }} {{ title }}"})
    compiled = []

    class Counting(jinja2.Environment):
        def compile(self, source, name=None, filename=None, *args, **kwargs):
            compiled.append(name)
            return super().compile(source, name, filename, *args, **kwargs)

    for _ in range(2):
        environment = Counting(loader=loader)
        rebuild.cache_templates(app_with(tmp_path, templates=types.SimpleNamespace(environment=environment)))
        assert environment.get_template("page.html").render(title="t") == "2 t"
    assert len(compiled) == 1
    assert list((tmp_path / ".doctrees" / "jinja").iterdir())


def test_a_template_cache_already_set_is_kept(tmp_path):
    mine = jinja2.FileSystemBytecodeCache(str(tmp_path))
    environment = jinja2.Environment(bytecode_cache=mine)
    rebuild.cache_templates(app_with(tmp_path, templates=types.SimpleNamespace(environment=environment)))
    assert environment.bytecode_cache is mine
    rebuild.cache_templates(app_with(tmp_path))          # a builder without templates: nothing


def test_warming_the_writer_highlights_with_the_lexers_the_pages_use(tmp_path):
    seen = []
    highlighter = types.SimpleNamespace(highlight_block=lambda source, lexer: seen.append(lexer))
    rebuild.warm_writer(app_with(tmp_path, highlighter=highlighter))
    assert sorted(seen) == ["ipython3", "ipythontb", "myst-ansi"]
    rebuild.warm_writer(app_with(tmp_path))             # no highlighter: nothing to warm


@pytest.mark.parametrize("hook", [lambda: rebuild.freeze_environment(None, None, []),
                                  lambda: rebuild.skip_final_collection(None, None)])
def test_freezing_moves_what_exists_out_of_the_collections(hook):
    assert gc.get_freeze_count() == 0
    try:
        hook()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_extension_connects_every_hook():
    connected = []
    rebuild.setup(types.SimpleNamespace(connect=lambda event, hook, **kw: connected.append((event, hook))))
    assert sorted(connected, key=repr) == sorted([
        ("builder-inited", rebuild.cache_templates),
        ("env-before-read-docs", rebuild.freeze_environment),
        ("env-before-read-docs", rebuild.wait_for_preexecute),
        ("build-finished", rebuild.skip_final_collection)], key=repr)


def test_templates_compiled_under_other_options_are_not_reused(tmp_path):
    """Jinja keys compiled code on the template's source only; the cache's folder covers
    the rest (here: an option that changes the compiled code), so nothing stale is served."""
    loader = jinja2.DictLoader({"page.html": "{% if true %}\nA{% endif %}"})
    rendered = []
    for trim in (False, True):
        environment = jinja2.Environment(loader=loader, trim_blocks=trim)
        rebuild.cache_templates(app_with(tmp_path, templates=types.SimpleNamespace(environment=environment)))
        rendered.append(environment.get_template("page.html").render())
    assert rendered == ["\nA", "A"]
    assert len(list((tmp_path / ".doctrees" / "jinja").iterdir())) == 2
