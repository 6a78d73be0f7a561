"""The elements of a phone's screen, as its view hierarchy lists them (``uiautomator dump`` on
Android): what the action guard reads to know what a tap would press (:mod:`darwin.envs.guard`).

    >>> dump = ('<?xml version="1.0" encoding="UTF-8"?><hierarchy rotation="0">'
    ...         '<node text="" content-desc="" package="com.x" clickable="true" focused="false" bounds="[0,0][100,50]">'
    ...         '<node text="Post" content-desc="" package="com.x" clickable="false" focused="false" bounds="[10,10][90,40]"/>'
    ...         '</node></hierarchy>UI hierchary dumped to: /dev/tty')
    >>> [(e.text, e.clickable, e.bounds) for e in parse_uiautomator_dump(dump)]
    [('', True, (0, 0, 100, 50)), ('Post', False, (10, 10, 90, 40))]
    >>> parse_uiautomator_dump(uiautomator_dump(parse_uiautomator_dump(dump))) == parse_uiautomator_dump(dump)
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree import ElementTree


@dataclass(frozen=True)
class ScreenElement:
    """One node of a screen's view hierarchy, as ``uiautomator dump`` lists it.

    ``bounds`` is ``(x0, y0, x1, y1)`` in device pixels (``x1``, ``y1`` exclusive).
    """

    text: str
    description: str
    package: str
    bounds: tuple[int, int, int, int]
    clickable: bool = False
    focused: bool = False
    class_name: str = ""
    """The view's class (``android.widget.EditText``, ``android.widget.Button`` ...), as dumped."""

    @property
    def is_text_field(self) -> bool:
        """Whether the element is a text field (an ``EditText`` or one of its kind)."""
        return self.class_name.endswith(_TEXT_FIELD_CLASSES)

    def contains(self, x: int, y: int) -> bool:
        x0, y0, x1, y1 = self.bounds
        return x0 <= x < x1 and y0 <= y < y1

    def inside(self, other: ScreenElement) -> bool:
        """True when this element's bounds lie within ``other``'s."""
        x0, y0, x1, y1 = self.bounds
        ox0, oy0, ox1, oy1 = other.bounds
        return ox0 <= x0 and oy0 <= y0 and x1 <= ox1 and y1 <= oy1


_TEXT_FIELD_CLASSES = ("EditText", "AutoCompleteTextView", "SearchAutoComplete")
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def parse_uiautomator_dump(xml: str) -> list[ScreenElement]:
    """The nodes of a ``uiautomator dump`` in document order (parents before children, later
    siblings drawn on top). Raises :class:`ValueError` when ``xml`` holds no hierarchy."""
    start, end = xml.find("<hierarchy"), xml.rfind("</hierarchy>")
    if start < 0 or end < 0:
        raise ValueError(f"not a uiautomator dump (no <hierarchy> element): {xml[:200]!r}")
    root = ElementTree.fromstring(xml[start : end + len("</hierarchy>")])
    elements = []
    for node in root.iter("node"):
        match = _BOUNDS.fullmatch(node.get("bounds", ""))
        if match is None:
            continue
        x0, y0, x1, y1 = (int(v) for v in match.groups())
        elements.append(
            ScreenElement(
                text=node.get("text", ""),
                description=node.get("content-desc", ""),
                package=node.get("package", ""),
                bounds=(x0, y0, x1, y1),
                clickable=node.get("clickable") == "true" or node.get("long-clickable") == "true",
                focused=node.get("focused") == "true",
                class_name=node.get("class", ""),
            )
        )
    return elements


UIAUTOMATOR_DUMPED = "UI hierchary dumped to: /dev/tty"
"""What ``uiautomator dump /dev/tty`` prints after the XML (Android's own spelling)."""


def uiautomator_dump(elements: list[ScreenElement]) -> str:
    """``elements`` as ``uiautomator dump /dev/tty`` prints them: a flat hierarchy under one
    root node, in paint order, followed by :data:`UIAUTOMATOR_DUMPED` (what a SimPhone served
    over ADB answers)."""
    root = ElementTree.Element("hierarchy", rotation="0")
    for index, e in enumerate(elements):
        x0, y0, x1, y1 = e.bounds
        ElementTree.SubElement(
            root,
            "node",
            {
                "index": str(index),
                "text": e.text,
                "resource-id": "",
                "class": e.class_name,
                "package": e.package,
                "content-desc": e.description,
                "clickable": str(e.clickable).lower(),
                "focused": str(e.focused).lower(),
                "bounds": f"[{x0},{y0}][{x1},{y1}]",
            },
        )
    xml = ElementTree.tostring(root, encoding="unicode")
    return f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>{xml}{UIAUTOMATOR_DUMPED}\n"
