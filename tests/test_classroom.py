"""A class in the room (issue 42), its state and its rules, on every store: in the process, SQLite in WAL mode, and a
real Redis (Debian's redis-server, started here on a free port). Two stores on one Redis are two replicas."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest

from classroom import classes
from classroom.classes import Refused
from classroom.store import MemoryStore, RedisStore, SqliteStore, StoreDown

pytestmark = pytest.mark.xdist_group("redis")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """Debian's redis-server on a free port (.ci/run installs it). `folder`: append every write to a file there, so
    that it can be killed and started again with what it held (as a Redis with persistence restarts); None: keep
    nothing on disk."""

    def __init__(self, folder=None):
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is missing: apt-get install redis-server (.ci/run installs it)")
        self.port, self.folder = _free_port(), folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        kept = ["--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "always"] if self.folder else []
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", *(kept or ["--appendonly", "no"])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while True:
            try:
                RedisStore(self.url).get("ping")
                return
            except StoreDown:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def redis_url():
    redis = Redis()
    yield redis.url
    redis.kill()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(str(tmp_path / "classes.sqlite"))
    return RedisStore(request.getfixturevalue("redis_url"))


def test_a_lecturer_leads_and_a_student_follows_the_view(store):
    code, secret = classes.start(store)
    assert classes.CODE_PATTERN.fullmatch(code) and len(secret) >= 32  # 24 random bytes, URL-safe
    assert classes.join(store, code.lower(), "student-1") is None  # no view yet; a code typed in lower case
    first = classes.lead(store, code, secret, "/multihead", {"heads": "4", "mh_slide": "Heads"})
    now = classes.join(store, code, "student-1")
    assert (now.page, now.params, now.version) == ("/multihead", {"heads": "4", "mh_slide": "Heads"}, 1) == (
        first.page, first.params, first.version)  # fmt: skip
    assert classes.lead(store, code, secret, "/", {"stage": "softmax"}).version == 2
    assert classes.view(store, code).params == {"stage": "softmax"}


def test_the_secret_is_kept_only_as_its_hash_and_a_forged_move_changes_nothing(store):
    code, secret = classes.start(store)
    classes.lead(store, code, secret, "/", {"stage": "softmax"})
    assert store.get(f"class:{code}:lead") == classes._hash(secret) != secret
    for forged in ("", "guess", secret[:-1], classes._hash(secret)):
        with pytest.raises(Refused, match=f"only the lecturer of class {code} can do that"):
            classes.lead(store, code, forged, "/decoding", {})
        with pytest.raises(Refused, match="only the lecturer"):
            classes.ask(store, code, forged, "?", ["a", "b"], "a")
    assert classes.view(store, code).page == "/" and classes.view(store, code).version == 1


def test_a_code_guessed_is_refused_and_guessing_is_rate_limited(store):
    classes.start(store)
    for attempt in range(classes.MAX_TRIES):
        with pytest.raises(Refused, match="there is no class 222222|a join code is 6 characters"):
            classes.join(store, "222222" if attempt % 2 else "0OIL1x", "guesser")
    with pytest.raises(Refused, match="10 join codes a minute at most"):
        classes.join(store, "222223", "guesser")
    code, _ = classes.start(store)
    assert classes.join(store, code, "someone else") is None  # the limit is the guesser's, not the room's


def test_a_question_takes_one_answer_per_student_until_the_reveal(store):
    code, secret = classes.start(store)
    asked = classes.ask(store, code, secret, "Which key does 'it' weigh most?", ["the", "cat", "it"], "cat")
    classes.answer(store, code, asked.key, "s1", "the")
    classes.answer(store, code, asked.key, "s1", "cat")  # changed: still one answer
    classes.answer(store, code, asked.key, "s2", "cat")
    classes.answer(store, code, asked.key, "s3", "it")
    assert classes.tally(store, code) == {"the": 0, "cat": 2, "it": 1}
    with pytest.raises(Refused, match="'dog' is not one of the options: the, cat, it"):
        classes.answer(store, code, asked.key, "s4", "dog")
    with pytest.raises(Refused, match="no longer open"):
        classes.answer(store, code, "an old question", "s4", "cat")
    shown = classes.reveal(store, code, secret)
    assert shown.revealed and shown.answer == "cat"
    with pytest.raises(Refused, match="answers are closed"):
        classes.answer(store, code, asked.key, "s4", "the")
    later = classes.ask(store, code, secret, "Which head looks back?", ["head 1", "head 2"], "head 2")
    classes.answer(store, code, later.key, "s1", "head 2")
    rows = classes.answers_csv(store, code, secret).splitlines()  # every question, in order; the open one too
    first = "Which key does 'it' weigh most?"
    assert rows == [
        "number,question,option,answers,right,revealed",
        *(f"1,{first},{option},{n},{option == 'cat'},True" for option, n in (("the", 0), ("cat", 2), ("it", 1))),
        "2,Which head looks back?,head 1,0,False,False",
        "2,Which head looks back?,head 2,1,True,False",
    ]
    with pytest.raises(Refused, match="only the lecturer"):
        classes.answers_csv(store, code, "a student's guess")


def test_answers_are_capped_per_question(store, monkeypatch):
    monkeypatch.setattr(classes, "MAX_ANSWERS", 3)
    code, secret = classes.start(store)
    asked = classes.ask(store, code, secret, "?", ["a", "b"], "a")
    for student in ("s1", "s2", "s3"):
        classes.answer(store, code, asked.key, student, "a")
    with pytest.raises(Refused, match="this question has its 3 answers"):
        classes.answer(store, code, asked.key, "s4", "b")
    classes.answer(store, code, asked.key, "s1", "b")  # one who answered may still change
    assert classes.tally(store, code) == {"a": 2, "b": 1}


def test_a_class_expires_after_its_idle_time(store, monkeypatch):
    monkeypatch.setattr(classes, "IDLE_SECONDS", 1)
    code, secret = classes.start(store)
    classes.lead(store, code, secret, "/", {})
    time.sleep(2.1)
    with pytest.raises(Refused, match=f"there is no class {code}"):
        classes.join(store, code, "late")
    with pytest.raises(Refused, match="has ended or never began"):
        classes.lead(store, code, secret, "/", {})


def test_two_replicas_on_one_redis_share_the_class(redis_url):
    replica_a, replica_b = RedisStore(redis_url), RedisStore(redis_url)
    code, secret = classes.start(replica_b)
    classes.lead(replica_b, code, secret, "/decoding", {"dec_step": "3"})
    assert classes.join(replica_a, code, "student").params == {"dec_step": "3"}
    asked = classes.ask(replica_b, code, secret, "?", ["a", "b"], "b")
    classes.answer(replica_a, code, asked.key, "student", "b")
    assert classes.tally(replica_b, code) == {"a": 0, "b": 1}


def test_a_store_that_cannot_be_reached_says_so():
    down = RedisStore(f"redis://127.0.0.1:{_free_port()}/0", timeout=0.2)
    with pytest.raises(StoreDown, match="cannot be reached"):
        classes.view(down, "ABCDEF")
    with pytest.raises(StoreDown):
        classes.start(down)
