"""Task templates of SimPhone's apps, one module per app (see docs/tasks.md, "Templates").

Importing this package registers every template in :data:`darwin.templates.TEMPLATES`.
"""

from __future__ import annotations

from darwin.envs.sim.templates import (
    amazon,  # noqa: F401
    booking,  # noqa: F401
    calculator,  # noqa: F401
    calendar,  # noqa: F401
    chrome,  # noqa: F401
    clock,  # noqa: F401
    contacts,  # noqa: F401
    cross_app,  # noqa: F401  (templates over two apps)
    dictionary,  # noqa: F401
    files,  # noqa: F401
    mail,  # noqa: F401
    messages,  # noqa: F401
    notes,  # noqa: F401
    play,  # noqa: F401
    settings,  # noqa: F401
    tasks,  # noqa: F401
    x,  # noqa: F401
)
