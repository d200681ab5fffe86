"""Masks you compose, as PyTorch's FlexAttention writes them (torch.nn.attention.flex_attention).

A piece of a mask is a `mask_mod`: a function of a query's position q and a key's position kv (and the batch b and
head h, which these pieces do not read) that is True where the query may see the key:

    causal       kv ≤ q                  a decoder: nothing after the query
    window w     |q − kv| < w            keys within w of the query; with causal, its last w (Mistral's window)
    sinks s      kv < s                  the first s keys (StreamingLLM's attention sinks)
    prefix p     q < p and kv < p        the first p tokens see each other (a prefix-LM is "causal | prefix p")
    document     doc(q) = doc(kv)        each token sees only its own sentence (packed documents)
    dilated s    (q − kv) mod s = 0      every s-th key from the query (Longformer's dilation)

Pieces compose with & (FlexAttention's and_masks: both keep the key) and | (or_masks: either does), & binding
tighter than |, and parentheses: "causal & (window 8 | sinks 4)" reads "causal and (window 8 or the first 4)".
`kept(n)` calls the composed mask_mod once on every (q, kv) pair at once, as FlexAttention's create_mask does.

A kernel cuts the n × n matrix into blocks of B queries × B keys. `block_kinds` sorts them as FlexAttention's
create_block_mask does: empty (no key kept: the kernel skips it), full (every key kept: no mask to apply) and
partial; positions past n count as hidden, so a block that reaches past n is never full."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import torch

from attention_core.checks import check_int

MAX_CHARS = 200  # a composition is a line, not a program
MAX_PIECES = 8
SENTENCE_ENDS = ".!?…"
# The space (and newline) a subword tokenizer writes into its tokens: byte-level BPE's Ġ and Ċ, SentencePiece's ▁.
SPACE_MARKERS = "Ġ▁Ċ"
# The document piece's sentences (sentence_rule, said on the page under its mask): a run of marks ("..." or "?!")
# ends one sentence, and a mark between two digits (3.5) or in a known abbreviation (e.g.) ends none.
ABBREVIATIONS = ("Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "St.", "vs.", "cf.", "e.g.", "i.e.", "a.m.", "p.m.")
ABBREVIATION = re.compile(
    r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(a) for a in sorted(ABBREVIATIONS, key=len, reverse=True)) + ")",
    re.IGNORECASE,
)

MaskMod = Callable[..., torch.Tensor]  # (b, h, q_idx, kv_idx) -> bool, broadcast over the index tensors


@dataclasses.dataclass(frozen=True)
class Piece:
    """One kind of piece: its name in a composition, the number it takes (""), its words, and its mask_mod."""

    key: str
    number: str  # what its number is called ("" where it takes none)
    words: Callable[[int], str]  # its reading, given its number
    mod: Callable[[int, torch.Tensor], MaskMod]  # (its number, each token's sentence) -> mask_mod
    causal: bool = False  # hides every later key by itself


PIECES: dict[str, Piece] = {
    piece.key: piece
    for piece in (
        Piece("causal", "", lambda _: "causal", lambda _, doc: lambda b, h, q, kv: kv <= q, causal=True),
        Piece("window", "w", lambda w: f"window {w}", lambda w, doc: lambda b, h, q, kv: (q - kv).abs() < w),
        Piece("sinks", "s", lambda s: f"the first {s}", lambda s, doc: lambda b, h, q, kv: kv < s),
        Piece("prefix", "p", lambda p: f"prefix {p}", lambda p, doc: lambda b, h, q, kv: (q < p) & (kv < p)),
        Piece("document", "", lambda _: "its own sentence", lambda _, doc: lambda b, h, q, kv: doc[q] == doc[kv]),
        Piece(
            "dilated", "s", lambda s: f"every {ordinal(s)} key", lambda s, doc: lambda b, h, q, kv: (q - kv) % s == 0
        ),
    )
}
SYNTAX = (
    "the pieces are causal, window w, sinks s, prefix p, document and dilated s, joined by & (and), | (or) and "
    "parentheses, e.g. causal & (window 8 | sinks 4)"
)


@dataclasses.dataclass(frozen=True)
class Mask:
    """A composition: a piece with its number (op "piece"), or the pieces `parts` joined by "and" or "or"."""

    op: str
    key: str = ""
    number: int = 0
    parts: tuple[Mask, ...] = ()

    @property
    def causal(self) -> bool:
        """Hides every later key whatever n: a causal piece, an "and" with a causal part, an "or" of causal parts."""
        if self.op == "piece":
            return PIECES[self.key].causal
        return (any if self.op == "and" else all)(part.causal for part in self.parts)

    def cached(self, t: int) -> int:
        """Keys a decoder's cache must hold after t tokens, at most, for this mask to be exact: a window's w, the
        sinks' s, a prefix's p (any other piece: all t); an "and" the least of its parts', an "or" their sum."""
        if self.op == "piece":
            return min(t, self.number) if self.key in ("window", "sinks", "prefix") else t
        held = [part.cached(t) for part in self.parts]
        return min(held) if self.op == "and" else min(t, sum(held))

    def pieces(self) -> list[Mask]:
        return [self] if self.op == "piece" else [piece for part in self.parts for piece in part.pieces()]

    def words(self, inner: bool = False) -> str:
        """Plain words: "causal and (window 8 or the first 4)"; a part that joins parts in parentheses."""
        if self.op == "piece":
            return PIECES[self.key].words(self.number)
        said = f" {self.op} ".join(part.words(inner=True) for part in self.parts)
        return f"({said})" if inner else said

    def written(self) -> str:
        """As the address and the sidebar hold it: "causal & (window 8 | sinks 4)"."""
        if self.op == "piece":
            return f"{self.key} {self.number}" if PIECES[self.key].number else self.key
        said = (" & " if self.op == "and" else " | ").join(part.written_in(self.op) for part in self.parts)
        return said

    def written_in(self, outer: str) -> str:
        return f"({self.written()})" if outer == "and" and self.op == "or" else self.written()

    def mod(self, doc: torch.Tensor) -> MaskMod:
        """The composed mask_mod, as and_masks and or_masks build it; doc: each token's sentence [n]."""
        if self.op == "piece":
            return PIECES[self.key].mod(self.number, doc)
        mods = [part.mod(doc) for part in self.parts]
        join = torch.logical_and if self.op == "and" else torch.logical_or

        def joined(b, h, q, kv):
            result = mods[0](b, h, q, kv)
            for mod in mods[1:]:
                result = join(result, mod(b, h, q, kv))
            return result

        return joined

    def kept(self, tokens, device: torch.device | str = "cpu") -> torch.Tensor:
        """[n, n] bool for these tokens, True where query q may see key kv."""
        return on_grid(self.mod(sentences(tokens).to(device)), len(tokens), device)


def on_grid(mod: MaskMod, n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[n, n] bool: a mask_mod called once on every (query, key) pair at once, as FlexAttention's create_mask does."""
    q, kv = torch.arange(n, device=device)[:, None], torch.arange(n, device=device)[None, :]
    return mod(0, 0, q, kv).expand(n, n).clone()


def causal_mask(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[n, n] bool, True where query i may attend to key j, i.e. j <= i: the causal piece on every pair, the one
    place the causal mask is built."""
    return on_grid(PIECES["causal"].mod(0, None), n, device)


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    last = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{last}"


def sentences(tokens) -> torch.Tensor:
    """Each token's sentence, counted from 0: a new one starts after a token that ends one (sentence_ends)."""
    ends = torch.tensor(sentence_ends(tokens), dtype=torch.long)
    return torch.cumsum(ends, 0) - ends  # the sentences ended before each token: its mark is its own sentence's


def sentence_ends(tokens) -> list[bool]:
    """For each token, whether a sentence ends with it (sentence_rule). The tokens are spelled out as one text, a
    space where a word starts (a tokenizer's own marker, Ġ or ▁, where it writes one; else between two words), so
    that a mark is read with what stands beside it: "3.5" and "e.g." are the same text whoever cut them."""
    text, ends_at, spaced = spelled(tokens)
    inside = {at for found in ABBREVIATION.finditer(text) for at in range(found.start(), found.end())}
    ends = []
    for at in ends_at:
        mark, after = at - 1, text[at : at + 1]  # the token's last character in the text, and the one after it
        ends.append(
            at > 0
            and text[mark] in SENTENCE_ENDS
            and mark not in inside
            and not (text[mark] == "." and text[mark - 1 : mark].isdigit() and after.isdigit())
            and not (spaced and after.isalnum())  # deploy.md: where the spaces are known, a mark inside a word
        )
    for i in range(len(ends) - 1):  # a run of marks ends one sentence: at its last mark
        if ends[i] and ends[i + 1] and bare(tokens[i + 1]).strip(SENTENCE_ENDS) == "":
            ends[i] = False
    return ends


def sentence_rule(tokens) -> str:
    """The rule sentence_ends follows for these tokens, in a sentence (the page says it under a document mask)."""
    inside = " or inside a word (deploy.md)" if spelled(tokens)[2] else ""
    return (
        "A sentence ends at . ! ? or …; a run of them (“...”, “?!”) ends one sentence, and a mark between two digits "
        f"(3.5){inside} or in {', '.join(ABBREVIATIONS)} ends none."
    )


def bare(token) -> str:
    """A token without the space it carries (a tokenizer's marker or a real space) and WordPiece's ##."""
    return str(token).strip().strip(SPACE_MARKERS).removeprefix("##")


def spelled(tokens) -> tuple[str, list[int], bool]:
    """The tokens as one text, a space where a word starts; where each token ends in it; and whether the tokenizer
    wrote its spaces (so that a character with no space before it is known to join the word before)."""
    tokens = [str(token) for token in tokens]
    marked = any(token[:1] in SPACE_MARKERS or token[:1].isspace() for token in tokens[1:])
    text, ends_at = "", []
    for token in tokens:
        word = bare(token)
        if marked:  # byte-level BPE (Ġ) and SentencePiece (▁) write the space a word starts with
            starts = token[:1] in SPACE_MARKERS or token[:1].isspace()
        else:  # a word tokenizer (the app's own, WordPiece): two words side by side had a space between them
            starts = text[-1:].isalnum() and word[:1].isalnum() and not str(token).startswith("##")
        text += (" " if starts and text and not text.endswith(" ") else "") + word
        ends_at.append(len(text))
        if marked and word and (token[-1] in SPACE_MARKERS or token[-1].isspace()):
            text += " "  # ".Ċ": the mark, then its newline
    return text, ends_at, marked


def parse_mask(text: str) -> Mask:
    """Read a composition ("causal & (window 8 | sinks 4)"; "and", "or" as words too). Raises ValueError naming
    the field, what it could not read, and the syntax."""
    if not isinstance(text, str):
        raise ValueError(f"mask must be text; got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ValueError(f"mask has {len(text)} characters; at most {MAX_CHARS} are allowed")
    words = [word.lower() for word in re.findall(r"[A-Za-z_]+|\d+|\S", text)]
    words = ["&" if word == "and" else "|" if word == "or" else word for word in words]
    reader = _Reader(text, words)
    mask = reader.either()
    if reader.at < len(words):
        reader.refuse(f"did not expect {words[reader.at]!r} there")
    if len(mask.pieces()) > MAX_PIECES:
        raise ValueError(f"mask {text!r} has {len(mask.pieces())} pieces; at most {MAX_PIECES} are allowed")
    return mask


class _Reader:
    """Recursive descent: either := both ("|" both)*; both := one ("&" one)*; one := "(" either ")" | piece."""

    def __init__(self, text: str, words: list[str]):
        self.text, self.words, self.at = text, words, 0

    def refuse(self, why: str):
        raise ValueError(f"mask {self.text!r}: {why}; {SYNTAX}")

    def peek(self) -> str:
        return self.words[self.at] if self.at < len(self.words) else ""

    def take(self) -> str:
        word = self.peek()
        if not word:
            self.refuse("it ends too soon")
        self.at += 1
        return word

    def joined(self, op: str, sign: str, part: Callable[[], Mask]) -> Mask:
        parts = [part()]
        while self.peek() == sign:
            self.take()
            parts.append(part())
        return parts[0] if len(parts) == 1 else Mask(op, parts=tuple(parts))

    def either(self) -> Mask:
        return self.joined("or", "|", self.both)

    def both(self) -> Mask:
        return self.joined("and", "&", self.one)

    def one(self) -> Mask:
        word = self.take()
        if word == "(":
            inner = self.either()
            if self.peek() != ")":
                self.refuse("a parenthesis is not closed")
            self.take()
            return inner
        if word not in PIECES:
            self.refuse(f"{word!r} is not a piece")
        piece = PIECES[word]
        if not piece.number:
            return Mask("piece", word)
        number = self.take()
        if not number.isdigit():
            self.refuse(f"{word} takes a number ({piece.number}); got {number!r}")
        return Mask("piece", word, check_int(f"mask: {word}'s {piece.number}", int(number), 1, 4096))


def empty_row(mask: torch.Tensor) -> int | None:
    """The first query that keeps no key (None: every one keeps one)."""
    empty = ~mask.any(dim=-1)
    return int(empty.nonzero()[0, 0]) if bool(empty.any()) else None


def later_key(mask: torch.Tensor) -> tuple[int, int] | None:
    """The first (query, key) where a query sees a later key (None: the mask is causal at this length)."""
    later = (mask & ~causal_mask(mask.shape[-1], mask.device)).nonzero()
    return (int(later[0, 0]), int(later[0, 1])) if len(later) else None


EMPTY, PARTIAL, FULL = 0, 1, 2  # a block's kind, as create_block_mask sorts them


def block_shares(mask: torch.Tensor, block: int) -> torch.Tensor:
    """[⌈n/B⌉, ⌈n/B⌉] float64: each block's share of kept cells, for a mask [n, n] cut into blocks of B × B (the
    cells past n count as hidden, as FlexAttention pads them)."""
    if block < 1:
        raise ValueError(f"block must be at least 1; got {block}")
    n = mask.shape[-1]
    count = -(-n // block)
    padded = torch.zeros(count * block, count * block, dtype=torch.float64, device=mask.device)
    padded[:n, :n] = mask
    return padded.reshape(count, block, count, block).mean(dim=(1, 3))  # [query block, key block]


def block_kinds(mask: torch.Tensor, block: int) -> torch.Tensor:
    """[⌈n/B⌉, ⌈n/B⌉] of EMPTY, PARTIAL, FULL for a mask [n, n] cut into blocks of B × B (past n: hidden)."""
    shares = block_shares(mask, block)  # a mean of 0s and 1s: exactly 0 or 1 where every cell agrees
    return torch.where(shares == 0, EMPTY, torch.where(shares == 1, FULL, PARTIAL))
