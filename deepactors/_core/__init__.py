"""The loop core: what differs between asyncio and trio, and what every layer runs on.

``loops`` is the one module that knows which event loop runs (system tasks,
thread-safe calls, parking lots); ``perloop`` keeps one resource per live loop
run; ``pacing`` keeps a wave of actor steps from holding the loop; ``threads``
runs blocking calls in worker threads that a deadline may leave behind. The rest
of the package is written against anyio and these four. Beside them, ``logs``
gives every module its logger (records for the standard ``logging`` module),
``public`` gives public names their public module path, ``stamps`` writes
times as ISO 8601 UTC stamps, and ``jsonvalue`` names JSON data as a type.
"""
