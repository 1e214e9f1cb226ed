"""The local stand-in of the game service (``gitops serve``): tokens, scopes, rate limits, code and branches.

Modules: ``app`` (the ASGI application and the order of checks), ``handlers`` (what each endpoint does),
``accounts`` (the YAML accounts file), ``store`` (SQLite state), ``ratelimit`` (windows and unlimited grants),
``faults`` (fault injection), ``runner`` (uvicorn), ``testing`` (``running_standin`` for tests).
"""
