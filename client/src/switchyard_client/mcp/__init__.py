"""`switchyard mcp`: the Switchyard API as Model Context Protocol tools (tools.py, their output
schemas in schemas.py), served over stdio (server.py) and by the web app's ``/mcp``. Needs the
optional ``mcp`` package; nothing else in the client imports this one but the CLI."""
