"""A class in the room: a lecturer leads, students follow the lecturer's view and answer questions before the reveal.

    start      a join code for the room (6 characters nobody misreads) and a private lecturer secret
               (192 random bits, kept only as its SHA-256: the store never holds what would let anyone lead)
    lead       the lecturer's view (page, settings, slide) becomes the class's, with a version that followers
               compare with the one they show
    ask        a question from what is on screen: its options, and the real answer taken from the numbers
    answer     one answer per student session, one of the options, changeable until the reveal; at most
               MAX_ANSWERS per question
    reveal     the distribution beside the real answer
    answers_csv  every question the class was asked, in order, with its answers counted (anonymous)
    join       a code typed by hand: rate-limited per client (MAX_TRIES a minute), so that guessing is slow

Only the holder of the secret can lead, ask or reveal: anything else is refused (Refused, naming what and why),
and a refusal changes nothing. A class left idle for IDLE_SECONDS expires with everything in it."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import hmac
import io
import json
import re
import secrets
import time

from classroom.store import Store

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 6  # 31⁶ ≈ 8.9·10⁸ codes; at MAX_TRIES a minute a guesser needs years to find one class
CODE_PATTERN = re.compile(f"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}")
SECRET_BYTES = 24  # 192 bits
IDLE_SECONDS = 3 * 3600
MAX_TRIES = 10  # codes a client may try per minute
MAX_ANSWERS = 500  # answers a question takes (a large lecture hall)
MAX_OPTIONS = 12
MAX_VIEW_CHARS = 4000  # a view is an address's settings: a few hundred characters


class Refused(ValueError):
    """An action the class does not take, with the reason in words."""


@dataclasses.dataclass(frozen=True)
class View:
    """What the lecturer shows: the page's address and its settings (the link's own values), and a version."""

    page: str
    params: dict
    version: int
    at: float


@dataclasses.dataclass(frozen=True)
class Question:
    key: str
    text: str
    options: tuple[str, ...]
    answer: str  # the real answer, from the numbers on screen
    revealed: bool = False
    at: float = 0.0  # when it was asked (time.time())


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _keys(code: str) -> dict[str, str]:
    return {part: f"class:{code}:{part}" for part in ("lead", "view", "question", "answers", "asked")}


def start(store: Store) -> tuple[str, str]:
    """A new class: (its join code, the lecturer's secret). The secret is shown once and never stored."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    for _ in range(20):
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if store.add(_keys(code)["lead"], _hash(secret), IDLE_SECONDS):
            return code, secret
    raise Refused("no free join code was found; try again")  # 20 taken codes in a row: the store is full


def _checked_code(code: str) -> str:
    code = str(code).strip().upper()
    if not CODE_PATTERN.fullmatch(code):
        raise Refused(f"a join code is {CODE_LENGTH} characters from {CODE_ALPHABET}; got {code[:12]!r}")
    return code


def _as_lecturer(store: Store, code: str, secret: str) -> str:
    code = _checked_code(code)
    held = store.get(_keys(code)["lead"])
    if held is None:
        raise Refused(f"class {code} has ended or never began")
    if not hmac.compare_digest(held, _hash(str(secret))):
        raise Refused(f"only the lecturer of class {code} can do that: this link does not lead it")
    return code


def lead_check(store: Store, code: str, secret: str) -> str:
    """The class's code if `secret` is its lecturer's (the private link); Refused otherwise."""
    return _as_lecturer(store, code, secret)


def _refresh(store: Store, code: str, held: str) -> None:
    store.put(_keys(code)["lead"], held, IDLE_SECONDS)


def join(store: Store, code: str, client: str) -> View | None:
    """A student joins by code: the class's view now (None before the lecturer's first). Rate-limited per client."""
    tries = store.count(f"tries:{client}", 60)
    if tries > MAX_TRIES:
        raise Refused(f"{MAX_TRIES} join codes a minute at most: wait a minute and try again")
    code = _checked_code(code)
    if store.get(_keys(code)["lead"]) is None:
        raise Refused(f"there is no class {code}: check the code on the screen")
    return view(store, code)


def lead(store: Store, code: str, secret: str, page: str, params: dict) -> View:
    """The lecturer's view becomes the class's."""
    code = _as_lecturer(store, code, secret)
    text = json.dumps({"page": page, "params": params}, sort_keys=True)
    if len(text) > MAX_VIEW_CHARS or not re.fullmatch(r"/[a-z_]*", page):
        raise Refused(f"a view is a page of this app with its settings ({MAX_VIEW_CHARS} characters at most)")
    before = view(store, code)
    shown = View(page, dict(params), (before.version + 1) if before else 1, time.time())
    store.put(_keys(code)["view"], json.dumps(dataclasses.asdict(shown)), IDLE_SECONDS)
    _refresh(store, code, store.get(_keys(code)["lead"]))
    return shown


def view(store: Store, code: str) -> View | None:
    raw = store.get(_keys(_checked_code(code))["view"])
    return None if raw is None else View(**json.loads(raw))


def ask(store: Store, code: str, secret: str, text: str, options: list[str], answer: str) -> Question:
    """A question on what is on screen; its answers start empty. The question before it is kept, with its answers
    counted, for answers_csv."""
    code = _as_lecturer(store, code, secret)
    options = tuple(dict.fromkeys(str(option) for option in options))
    if not 2 <= len(options) <= MAX_OPTIONS or answer not in options:
        raise Refused(f"a question has 2 to {MAX_OPTIONS} different options, the answer among them")
    question = Question(secrets.token_hex(4), str(text)[:300], options, answer, at=time.time())
    keys = _keys(code)
    _keep(store, code)
    store.forget(keys["answers"])
    store.put(keys["question"], json.dumps(dataclasses.asdict(question)), IDLE_SECONDS)
    return question


def question(store: Store, code: str) -> Question | None:
    raw = store.get(_keys(_checked_code(code))["question"])
    if raw is None:
        return None
    fields = json.loads(raw)
    return Question(**{**fields, "options": tuple(fields["options"])})


def answer(store: Store, code: str, key: str, student: str, option: str) -> None:
    """One student's answer (again: it replaces the first), until the reveal."""
    asked = question(store, code)
    if asked is None or asked.key != key:
        raise Refused("that question is no longer open")
    if asked.revealed:
        raise Refused("the answer has been revealed: answers are closed")
    if option not in asked.options:
        raise Refused(f"{str(option)[:40]!r} is not one of the options: {', '.join(asked.options)}")
    answers = _keys(_checked_code(code))["answers"]
    held = store.all_in(answers)
    if student not in held and len(held) >= MAX_ANSWERS:
        raise Refused(f"this question has its {MAX_ANSWERS} answers")
    store.put_in(answers, student, option, IDLE_SECONDS)


def tally(store: Store, code: str) -> dict[str, int]:
    """How many chose each option (in the options' order)."""
    asked = question(store, code)
    if asked is None:
        return {}
    chosen = list(store.all_in(_keys(_checked_code(code))["answers"]).values())
    return {option: chosen.count(option) for option in asked.options}


def reveal(store: Store, code: str, secret: str) -> Question:
    code = _as_lecturer(store, code, secret)
    asked = question(store, code)
    if asked is None:
        raise Refused("there is no question to reveal")
    shown = dataclasses.replace(asked, revealed=True)
    store.put(_keys(code)["question"], json.dumps(dataclasses.asdict(shown)), IDLE_SECONDS)
    return shown


def _with_counts(store: Store, code: str) -> dict | None:
    """The open question with its answers counted, as answers_csv writes it (None where none is open)."""
    asked = question(store, code)
    return None if asked is None else {**dataclasses.asdict(asked), "counts": tally(store, code)}


def _keep(store: Store, code: str) -> None:
    """The open question, with its answers counted, among the class's questions asked before (for answers_csv)."""
    if (kept := _with_counts(store, code)) is not None:
        store.put_in(_keys(code)["asked"], kept["key"], json.dumps(kept), IDLE_SECONDS)


def answers_csv(store: Store, code: str, secret: str) -> str:
    """Every question the class was asked, in the order asked, as CSV, anonymous: one row per option, with how many
    chose it and whether it is the answer; `revealed` says whether the class saw the answer. Reads only: the open
    question is counted as it stands, the ones before as ask() kept them."""
    code = _as_lecturer(store, code, secret)
    before = {key: json.loads(raw) for key, raw in store.all_in(_keys(code)["asked"]).items()}
    if (now := _with_counts(store, code)) is not None:
        before[now["key"]] = now
    asked = sorted(before.values(), key=lambda q: q["at"])
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["number", "question", "option", "answers", "right", "revealed"])
    for number, kept in enumerate(asked, 1):
        for option, count in kept["counts"].items():
            writer.writerow([number, kept["text"], option, count, option == kept["answer"], kept["revealed"]])
    return out.getvalue()
