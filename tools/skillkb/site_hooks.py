"""mkdocs hooks (named in ``mkdocs.yml``): add the pages generated from the entries as virtual files.

Nothing is written into ``docs/``: entry pages, reference pages, topic pages, the version-anchor matrix,
the eval dashboard and its SVG charts exist only in the build. The library root is the folder of
``mkdocs.yml``.

mkdocs runs this file with ``tools/skillkb`` at the front of ``sys.path`` (so ``tokenize.py`` there
would shadow the standard library's): ``skillkb`` is imported inside the hooks, after that has ended.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.plugins.skillkb")
_generated = None  # skillkb.site.SitePages of the current build


def on_config(config):
    """Validate the library, generate every page once, and set the navigation (tiers, topics, overviews).

    The site refuses what ``skillkb validate`` refuses: a library with any error is not published.
    """
    global _generated
    from skillkb import site
    from skillkb.api import load_or_fail
    from skillkb.diagnostics import SkillkbError, errors_only, sort_key
    from skillkb.validate import validate_library

    root = Path(config.config_file_path).resolve().parent
    try:
        library = load_or_fail(root)
    except SkillkbError as exc:
        lines = "\n".join(d.render() for d in exc.diagnostics)
        raise PluginError(f"the library at {root} does not load; fix these and rebuild:\n{lines}") from None
    errors = sorted(errors_only(validate_library(library)), key=sort_key)
    if errors:
        lines = "\n".join(d.render() for d in errors)
        raise PluginError(f"`skillkb validate` refuses the library at {root}; fix these and rebuild:\n{lines}")
    results = config.extra.get("skillkb_eval_results")
    docs = Path(config.docs_dir)
    present = {p.relative_to(docs).as_posix() for p in docs.rglob("*.md")}
    _generated = site.generate(library, Path(results) if results else None, log.warning, present)
    config.nav = _generated.nav
    return config


def on_files(files: Files, config) -> Files:
    assert _generated is not None
    for src_uri, markdown in sorted(_generated.pages.items()):
        _add(files, File.generated(config, src_uri, content=markdown))
    for src_uri, data in sorted(_generated.assets.items()):
        _add(files, File.generated(config, src_uri, content=data))
    return files


def _add(files: Files, file: File) -> None:
    if files.get_file_from_path(file.src_uri) is not None:
        raise PluginError(f"docs/{file.src_uri} clashes with a page generated from the entries; remove it")
    files.append(file)


def on_page_content(html: str, page, config, files) -> str:
    """Refuse a page whose rendered HTML holds anything outside the allow-list (scripts, handlers, URLs)."""
    from skillkb.htmlsafety import rendered_problems

    problems = rendered_problems(html)
    if problems:
        listed = "; ".join(problems[:5])
        raise PluginError(f"{page.file.src_uri}: rendered HTML is not allowed on the site: {listed}")
    return html


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the hand-written tiers page with the generated ownership table."""
    from skillkb import site

    if _generated is not None and site.TIER_TABLE_MARKER in markdown:
        return markdown.replace(site.TIER_TABLE_MARKER, _generated.tier_table)
    return markdown
