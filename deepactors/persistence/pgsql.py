"""PostgreSQL building blocks shared by deepactors' own PostgreSQL users.

The checkpointer and store use them, and so does the server's runs relay
(``deepactors serve --runs-db``): :class:`PgDatabase`, one database on either
event loop (psycopg's async pool on asyncio, its sync pool in worker threads
on trio), and SQL written once as operations (:data:`Op`, generators of
:class:`Stmt` that get a :class:`Result` back) that either driver runs.
Importing this module needs psycopg (the ``postgres`` extra).
"""

from __future__ import annotations

from .postgres import Migration as Migration
from .postgres import Op as Op
from .postgres import PgDatabase as PgDatabase
from .postgres import PgErrors as PgErrors
from .postgres import Result as Result
from .postgres import Stmt as Stmt
from .postgres import prepare_schema as prepare_schema

__all__ = ["Migration", "Op", "PgDatabase", "PgErrors", "Result", "Stmt", "prepare_schema"]
