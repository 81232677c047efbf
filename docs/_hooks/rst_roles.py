"""Griffe extension for the API reference: Sphinx roles in docstrings become code spans.

Docstrings in the package sometimes say :func:`init_agent` or :meth:`invoke` (Sphinx
style); the API pages are Markdown, where those roles would show up literally. This turns
each role into plain inline code (``~`` prefixes dropped), at docs build time only.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|obj|data|exc):`~?([^`]+)`")


def strip_roles(text: str) -> str:
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


class RstRoles(griffe.Extension):
    """Rewrites Sphinx cross-reference roles in every loaded docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = strip_roles(obj.docstring.value)
