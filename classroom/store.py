"""Where a class's state lives: one small interface and three stores behind it.

    MemoryStore   in the process: one server, nothing to install (state ends with the process)
    SqliteStore   a file in WAL mode: one server, state that outlives a restart, several processes on one disk
    RedisStore    Redis (redis-py): replicas behind a balancer, each reading and writing the same class

A class needs little: values with an expiry (its lecturer's hash, its current view, its open question), a counter
with an expiry (join attempts, for the rate limit), and a map per question (one answer per student). Every method
raises StoreDown when the store cannot be reached, so that a page can say the link is lost and keep what it has."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Protocol


class StoreDown(ConnectionError):
    """The store cannot be reached (Redis stopped, a disk gone): the caller keeps what it has and says so."""


class Store(Protocol):
    def get(self, key: str) -> str | None: ...
    def put(self, key: str, value: str, seconds: int) -> None: ...
    def add(self, key: str, value: str, seconds: int) -> bool: ...  # only where the key is new
    def count(self, key: str, seconds: int) -> int: ...  # +1, and the expiry set on the first
    def put_in(self, key: str, field: str, value: str, seconds: int) -> None: ...
    def all_in(self, key: str) -> dict[str, str]: ...
    def forget(self, *keys: str) -> None: ...


class MemoryStore:
    """A dict with expiries, for one server process."""

    def __init__(self):
        self._values: dict[str, tuple[object, float]] = {}
        self._lock = threading.Lock()

    def _live(self, key: str):
        value = self._values.get(key)
        if value is not None and value[1] < time.monotonic():
            del self._values[key]
            return None
        return value

    def get(self, key: str) -> str | None:
        with self._lock:
            found = self._live(key)
            return None if found is None or isinstance(found[0], dict) else found[0]

    def put(self, key: str, value: str, seconds: int) -> None:
        with self._lock:
            self._values[key] = (value, time.monotonic() + seconds)

    def add(self, key: str, value: str, seconds: int) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._values[key] = (value, time.monotonic() + seconds)
            return True

    def count(self, key: str, seconds: int) -> int:
        with self._lock:
            found = self._live(key)
            total = 1 if found is None else int(found[0]) + 1
            self._values[key] = (str(total), time.monotonic() + seconds if found is None else found[1])
            return total

    def put_in(self, key: str, field: str, value: str, seconds: int) -> None:
        with self._lock:
            found = self._live(key)
            fields = dict(found[0]) if found is not None and isinstance(found[0], dict) else {}
            fields[field] = value
            self._values[key] = (fields, time.monotonic() + seconds)

    def all_in(self, key: str) -> dict[str, str]:
        with self._lock:
            found = self._live(key)
            return dict(found[0]) if found is not None and isinstance(found[0], dict) else {}

    def forget(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._values.pop(key, None)


class SqliteStore:
    """A SQLite file in WAL mode (readers never wait for the writer); one connection per thread."""

    def __init__(self, path: str):
        self.path = path
        self._local = threading.local()
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT, f TEXT, v TEXT, until REAL, PRIMARY KEY (k, f))")

    def _db(self) -> sqlite3.Connection:
        if getattr(self._local, "db", None) is None:
            try:
                self._local.db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
            except sqlite3.Error as error:
                raise StoreDown(f"the class store {self.path} cannot be opened ({error})") from None
        return self._local.db

    def _run(self, sql: str, *args) -> list[tuple]:
        try:
            db = self._db()
            db.execute("DELETE FROM kv WHERE until < ?", (time.time(),))
            return db.execute(sql, args).fetchall()
        except sqlite3.Error as error:
            raise StoreDown(f"the class store {self.path} cannot be used ({error})") from None

    def get(self, key: str) -> str | None:
        rows = self._run("SELECT v FROM kv WHERE k = ? AND f = ''", key)
        return rows[0][0] if rows else None

    def put(self, key: str, value: str, seconds: int) -> None:
        self._run("INSERT OR REPLACE INTO kv VALUES (?, '', ?, ?)", key, value, time.time() + seconds)

    def add(self, key: str, value: str, seconds: int) -> bool:
        inserted = self._run(
            "INSERT OR IGNORE INTO kv VALUES (?, '', ?, ?) RETURNING k", key, value, time.time() + seconds
        )
        return bool(inserted)

    def count(self, key: str, seconds: int) -> int:
        self._run("INSERT OR IGNORE INTO kv VALUES (?, '', '0', ?)", key, time.time() + seconds)
        self._run("UPDATE kv SET v = CAST(v AS INTEGER) + 1 WHERE k = ? AND f = ''", key)
        return int(self.get(key) or 0)

    def put_in(self, key: str, field: str, value: str, seconds: int) -> None:
        self._run("INSERT OR REPLACE INTO kv VALUES (?, ?, ?, ?)", key, "." + field, value, time.time() + seconds)
        self._run("UPDATE kv SET until = ? WHERE k = ?", time.time() + seconds, key)

    def all_in(self, key: str) -> dict[str, str]:
        rows = self._run("SELECT f, v FROM kv WHERE k = ? AND f != ''", key)
        return {field[1:]: value for field, value in rows}

    def forget(self, *keys: str) -> None:
        for key in keys:
            self._run("DELETE FROM kv WHERE k = ?", key)


class RedisStore:
    """Redis through redis-py: every replica of the app reads and writes the same classes."""

    def __init__(self, url: str, timeout: float = 1.0):
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                           decode_responses=True)  # fmt: skip
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self.url = url

    def _call(self, name: str, *args):
        try:
            return getattr(self._redis, name)(*args)
        except self._errors as error:
            raise StoreDown(f"the class store (Redis at {self.url}) cannot be reached ({error})") from None

    def get(self, key: str) -> str | None:
        return self._call("get", key)

    def put(self, key: str, value: str, seconds: int) -> None:
        self._call("set", key, value, seconds)

    def add(self, key: str, value: str, seconds: int) -> bool:
        try:
            return bool(self._redis.set(key, value, ex=seconds, nx=True))
        except self._errors as error:
            raise StoreDown(f"the class store (Redis at {self.url}) cannot be reached ({error})") from None

    def count(self, key: str, seconds: int) -> int:
        total = int(self._call("incr", key))
        if total == 1:
            self._call("expire", key, seconds)
        return total

    def put_in(self, key: str, field: str, value: str, seconds: int) -> None:
        self._call("hset", key, field, value)
        self._call("expire", key, seconds)

    def all_in(self, key: str) -> dict[str, str]:
        return dict(self._call("hgetall", key))

    def forget(self, *keys: str) -> None:
        if keys:
            self._call("delete", *keys)
