"""The ``docanchor`` command line, one module per job:

- :mod:`plugin.cli.app`: the group, its global options, the run's settings and error translation;
- :mod:`plugin.cli.files`: which files a folder gives;
- :mod:`plugin.cli.ingest_cmd`: ``ingest``;
- :mod:`plugin.cli.reading`: ``search``, ``read``, ``list``, ``anchor``, ``delete``;
- :mod:`plugin.cli.admin`: ``serve``, ``mcp``, ``reindex``;
- :mod:`plugin.cli.check`: ``check``;
- :mod:`plugin.cli.status`: ``status``;
- :mod:`plugin.cli.context`: ``context assemble`` and ``context compact``;
- :mod:`plugin.cli.local` and :mod:`plugin.cli.remote`: where commands send their work (the data dir in
  this process, or the API of a server running on it).

Importing this package loads no model, no Chroma and no torch: commands import what they use.
"""

from plugin.cli.app import main
from plugin.cli import admin, check, context, ingest_cmd, reading, status  # noqa: E402,F401  (each registers its commands on main)

__all__ = ["main"]
