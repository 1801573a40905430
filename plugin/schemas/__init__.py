"""Every request and response of DocAnchor's doors, defined once as pydantic models.

From these models come the checks a request body gets (:mod:`plugin.schemas.validate`), the
``components`` of ``/openapi.json`` (:mod:`plugin.openapi`), the MCP tools' ``inputSchema`` and
``outputSchema`` and the LobeChat manifest's ``parameters`` (:mod:`plugin.schemas.tools`).

- :mod:`plugin.schemas.common`: the base classes and the field types shared by several models.
- :mod:`plugin.schemas.requests`: the JSON bodies and query strings of the ``/v1`` routes.
- :mod:`plugin.schemas.responses`: what those routes answer, errors included.
- :mod:`plugin.schemas.tools`: the plugin/MCP tools' arguments and structured answers.
"""
