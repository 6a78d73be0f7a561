"""Task templates of SimPhone's apps, one module per app (see docs/tasks.md, "Templates").

Importing this package registers every template in :data:`darwin.templates.TEMPLATES`.
"""

from __future__ import annotations

from darwin.envs.sim.templates import clock  # noqa: F401
