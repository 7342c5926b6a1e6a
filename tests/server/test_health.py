"""Liveness (``/ok``) and readiness (``/ready``, ``/ok?check_db=1``) of an app without a database.

With PostgreSQL, and what they answer while it is down, see ``test_pg_restart.py``.
"""

from __future__ import annotations

import httpx

from deepactors.server import create_app

from .agents import Probe, blocking_agent


async def test_ok_says_alive_until_the_app_stops_serving_and_ready_has_nothing_to_check() -> None:
    app = create_app({"echo": blocking_agent(Probe())})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        async with app.router.lifespan_context(app):
            assert (await http.get("/ok")).json() == {"ok": True}
            for path in ("/ready", "/ok?check_db=1"):
                ready = await http.get(path)
                assert ready.status_code == 200
                assert ready.json() == {"ok": True, "checks": []}
        # Its lifespan has ended (shut down here; failed, it would be the same):
        # a liveness probe must say so rather than keep answering 200.
        gone = await http.get("/ok")
        assert gone.status_code == 503
        assert "stopped serving" in gone.json()["detail"]
