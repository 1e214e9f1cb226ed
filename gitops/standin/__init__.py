"""The local stand-in of the game service (``gitops serve``): tokens, scopes, rate limits, code and branches.

Modules: ``app`` (the ASGI application and the order of checks), ``endpoints`` (every route and how it
authenticates), ``handlers`` (what each endpoint does), ``wire`` (requests, answers, the error envelope),
``accounts`` (the YAML accounts file), ``store`` (SQLite state), ``ratelimit`` (windows and unlimited grants),
``faults`` (fault injection), ``runner`` (uvicorn), ``testing`` (``running_standin`` for tests), ``page.html`` (the
no-rate-limit page). ``docs/serve.md`` documents the behaviour.
"""
