"""``darwin view``: a local web app over runs (curves, episodes with their actions drawn on
the screens, verdicts), where a person labels episodes, plus a static export of the same pages
(docs/view.md).

Modules: :mod:`~darwin.view.source` opens what it shows, :mod:`~darwin.view.markers` places
actions on screens, :mod:`~darwin.view.pages` renders the pages, :mod:`~darwin.view.app` serves
them, :mod:`~darwin.view.server` runs the server and :mod:`~darwin.view.export` writes the
static site and the label files.
"""
