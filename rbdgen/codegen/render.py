"""Jinja2 environment over the shipped templates (file skeletons only)."""
from __future__ import annotations

import functools
from importlib import resources

import jinja2


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    root = resources.files("rbdgen.templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **ctx) -> str:
    return environment().get_template(template).render(**ctx)
