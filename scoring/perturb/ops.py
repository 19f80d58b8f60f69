"""Seeded caption perturbations from PR-MCS and UMIC, with provenance.

PR-MCS (§5.2, Algorithm 1): repetition, removal, masking, jumble, substitution.
UMIC (§3.2): keyword substitution, repetition & removal, word-order permutation
(its random and hard-negative captions live in `scoring.perturb.negatives`).

Every function is pure: the same text, operation, parameters, seed and language give the
same result on every machine (a local `random.Random(seed)`, never the global one, and no
ordering that depends on `hash()`). Results say what changed (`changed_spans`, character
offsets into the perturbed text) and report a no-op instead of silently returning the
caption unchanged.
"""
from __future__ import annotations

import operator
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from scoring.perturb.pos import TaggedToken, tag
from scoring.perturb.tokenize import joiner, normalize_lang, tokenize

PRMCS_OPS = ("repetition", "removal", "masking", "jumble", "substitution")
# UMIC's word-order permutation is PR-MCS's jumble (every token shuffled): one operation,
# named "jumble"; "permutation" is accepted as its alias wherever an operation is named.
UMIC_OPS = ("keyword-substitution", "repeat-remove", "jumble")
# The one list of operations, each once.
ALL_OPS = PRMCS_OPS + tuple(op for op in UMIC_OPS if op not in PRMCS_OPS)
OP_ALIASES = {"permutation": "jumble"}

MASK_TOKEN = "[MASK]"

# One line per operation, for menus and help texts.
OP_DESCRIPTIONS = {
    "repetition": "PR-MCS: each drawn token is written twice, in place",
    "removal": "PR-MCS: tokens are dropped (Algorithm 1 keeps about 40 %)",
    "masking": "PR-MCS: drawn tokens become [MASK], positions kept",
    "jumble": "PR-MCS jumble = UMIC word-order permutation (alias: permutation): all tokens shuffled",
    "substitution": "PR-MCS: critical objects (else nouns) swap places",
    "keyword-substitution": "UMIC: 30 % of nouns/verbs/adjectives replaced by same-POS corpus words",
    "repeat-remove": "UMIC: 30 % of words repeated or removed (50/50)",
}

# The p each paper uses; operations missing here take none. For repetition, removal, masking
# and repeat-remove it is a per-token probability (each token drawn independently); for
# keyword-substitution it is an exact fraction: round(p · number of keywords) of them, at least
# one, are replaced. Removal: Algorithm 1 keeps the tokens it draws at 0.4 and drops the others,
# so each token is removed with probability 0.6 (Figures 5 and 12-15 show captions cut to about 40 %).
DEFAULT_P = {
    "repetition": 0.4,
    "removal": 0.6,
    "masking": 0.4,
    "keyword-substitution": 0.3,
    "repeat-remove": 0.3,
}



def canonical_op(name: str) -> str:
    """The operation `name` stands for: one of ALL_OPS, its alias resolved ("permutation" is
    "jumble"), case and surrounding spaces ignored; ValueError naming the choices otherwise."""
    key = str(name or "").strip().lower()
    key = OP_ALIASES.get(key, key)
    if key not in ALL_OPS:
        aliases = ", ".join(f"{alias} (= {op})" for alias, op in OP_ALIASES.items())
        raise ValueError(f"unknown operation {name!r}; choose one of: {', '.join(ALL_OPS)} (aliases: {aliases})")
    return key


def default_p(op: str) -> float | None:
    """The p operation `op` takes when none is given (the paper's, `DEFAULT_P`), or None for
    an operation that takes none (jumble, substitution)."""
    return DEFAULT_P.get(canonical_op(op))


def default_p_text() -> str:
    """The defaults in words, for help texts: "repetition 0.4, removal 0.6, ..."."""
    return ", ".join(f"{op} {DEFAULT_P[op]:g}" for op in ALL_OPS if op in DEFAULT_P)


# Universal POS tags UMIC substitutes ("verb, adjective and noun").
KEYWORD_UPOS = ("NOUN", "PROPN", "VERB", "ADJ")
NOUN_UPOS = ("NOUN", "PROPN")

# Reshuffles before a shuffle that keeps the caption unchanged counts as a no-op; with two
# or more distinct items each try fails with probability at most 1/2.
_MAX_SHUFFLES = 200


@dataclass(frozen=True)
class Perturbation:
    """A perturbed caption and everything needed to reproduce and display it.

    `changed_spans` are (start, end) character offsets into `text`; a zero-width span
    (start == end) marks where removed tokens used to be. `tokens` are the output tokens
    for the word-level operations (None for substitution and keyword substitution, which
    rewrite spans of the original text in place). `p` is None for operations that take no
    probability; `critical` records the critical objects a substitution was given.
    """

    text: str
    op: str
    p: float | None
    seed: int
    lang: str
    parent: str
    changed_spans: list[tuple[int, int]]
    noop: bool
    noop_reason: str | None = None
    tokens: tuple[str, ...] | None = None
    critical: tuple[str, ...] | None = None

    def to_dict(self) -> dict:
        """The JSON object `caplens perturb` prints."""
        data = asdict(self)
        data["changed_spans"] = [list(span) for span in self.changed_spans]
        data["tokens"] = list(self.tokens) if self.tokens is not None else None
        del data["critical"]
        return data


def perturb(
    text: str,
    op: str,
    *,
    p: float | None = None,
    seed: int = 0,
    lang: str = "en",
    critical: Sequence[str] | None = None,
    corpus=None,
) -> Perturbation:
    """Apply operation `op` to caption `text`.

    p: per-token probability for repetition, removal, masking and repeat-remove; for
    keyword-substitution the fraction of nouns/verbs/adjectives replaced, exactly
    round(p · their number), at least one (default: the paper's; 0.4 for repetition and
    masking, 0.6 for removal (Algorithm 1 keeps the tokens drawn at 0.4), 0.3 for the UMIC
    operations; ignored and recorded as None for jumble and substitution). `op` may be an alias
    (`OP_ALIASES`: "permutation" is "jumble"); the result names the operation itself.
    critical: the caption's annotated critical objects, for substitution.
    corpus: captions (or a `PosVocabulary`) supplying replacement words for
    keyword-substitution; without one the caption's own words are used.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("caption text is empty: nothing to perturb")
    op = canonical_op(op)
    code = normalize_lang(lang)
    probability = _resolve_p(op, p)
    if isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    try:
        seed = operator.index(seed)  # accepts numpy integers too
    except TypeError:
        raise ValueError(f"seed must be an integer, got {seed!r}") from None
    critical_objects = _clean_critical(critical)
    rng = random.Random(seed)
    try:
        outcome = _OPERATIONS[op](text, rng, probability, code, critical_objects, corpus)
    except _NoTokens:
        outcome = _Outcome(tokens=(), noop_reason="the caption has no tokens to perturb")
    if outcome.noop_reason is not None:
        return Perturbation(
            text, op, probability, seed, code, text, [], True, outcome.noop_reason,
            outcome.tokens, critical_objects,
        )
    return Perturbation(
        outcome.text, op, probability, seed, code, text, outcome.spans, False, None,
        outcome.tokens, critical_objects,
    )


def perturb_all(text: str, **kwargs) -> list[Perturbation]:
    """The five PR-MCS perturbations of `text` with the same parameters and seed."""
    return [perturb(text, op, **kwargs) for op in PRMCS_OPS]


# --- internals ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    """What an operation made (text, changed spans, tokens) or, with `noop_reason`, why it left
    the caption as it was: `perturb` then keeps the parent's text and marks no span."""

    text: str | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)
    tokens: tuple[str, ...] | None = None
    noop_reason: str | None = None


@dataclass(frozen=True)
class _Piece:
    """One output token: `text` None marks removed tokens (a zero-width span)."""

    text: str | None
    changed: bool


def _resolve_p(op: str, p: float | None) -> float | None:
    if op not in DEFAULT_P:
        return None
    if p is None:
        return DEFAULT_P[op]
    try:
        value = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"p must be a number between 0 and 1, got {p!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"p must be between 0 and 1, got {value}")
    return value


def _clean_critical(critical) -> tuple[str, ...] | None:
    if critical is None:
        return None
    if isinstance(critical, str):
        critical = critical.split(";")
    cleaned = tuple(item.strip() for item in critical if item and item.strip())
    return cleaned or None


def _render(pieces: list[_Piece], lang: str) -> _Outcome:
    """Join pieces into text, collecting spans of changed tokens (adjacent ones merged)."""
    separator = joiner(lang)
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    tokens: list[str] = []
    position = 0
    removal_pending = False
    previous_changed = False
    for piece in pieces:
        if piece.text is None:
            removal_pending = True
            continue
        if tokens:
            parts.append(separator)
            position += len(separator)
        start = position
        if removal_pending:
            if not spans or spans[-1] != (start, start):
                spans.append((start, start))
            previous_changed = False
            removal_pending = False
        parts.append(piece.text)
        tokens.append(piece.text)
        position += len(piece.text)
        if piece.changed:
            if previous_changed:
                spans[-1] = (spans[-1][0], position)
            else:
                spans.append((start, position))
        previous_changed = piece.changed
    if removal_pending and (not spans or spans[-1] != (position, position)):
        spans.append((position, position))
    return _Outcome("".join(parts), spans, tuple(tokens))


def removed_words(perturbation: Perturbation) -> list[str]:
    """What each zero-width span of a removal stands for, in order: the words of the parent
    caption removed at that place, joined as its language joins words ([] for the other
    operations, or when the kept tokens cannot be placed in the parent)."""
    if perturbation.op != "removal" or perturbation.noop or perturbation.tokens is None:
        return []
    kept, words = list(perturbation.tokens), tokenize(perturbation.parent, perturbation.lang)
    separator = joiner(perturbation.lang)
    starts = [sum(len(t) for t in kept[:k]) + k * len(separator) for k in range(len(kept))]
    # A gap before kept token k (k == len(kept): after the last one) for each zero-width span.
    gaps = {sum(1 for begin in starts if begin < s) for s, e in perturbation.changed_spans if s == e}

    @lru_cache(maxsize=None)
    def place(k: int, i: int) -> tuple[int, ...] | None:
        """Positions in `words` of kept[k:], the first at i or later, with words skipped
        exactly where the gaps are."""
        if k == len(kept):
            return () if (i < len(words)) == (k in gaps) else None
        for j in range(i, len(words)):
            if (j > i) != (k in gaps):
                if j > i:
                    return None  # kept[k] must follow right after, and it does not
                continue
            if words[j] == kept[k]:
                rest = place(k + 1, j + 1)
                if rest is not None:
                    return (j, *rest)
        return None

    positions = place(0, 0)
    if positions is None:
        return []
    bounds = [-1, *positions, len(words)]
    return [separator.join(words[a + 1:b]) for a, b in zip(bounds, bounds[1:]) if b - a > 1]


def _draws(rng: random.Random, count: int, p: float) -> list[bool]:
    """Which tokens repetition or masking touches: each independently with probability p.

    Repetition, removal and masking read the same uniform draws, as Algorithm 1 does: with
    one seed and the default probabilities, repetition doubles exactly the tokens masking
    masks, and removal keeps exactly those tokens.
    """
    return [rng.random() < p for _ in range(count)]


class _NoTokens(Exception):
    """The caption has no tokens (e.g. only characters the tokenizer drops)."""


def _words(text: str, lang: str) -> list[str]:
    words = tokenize(text, lang)
    if not words:
        raise _NoTokens
    return words


def _no_draw_reason(count: int, p: float) -> str:
    return f"no token was drawn (p={p:g}, {count} token{'s' if count != 1 else ''})"


def _repetition(text, rng, p, lang, critical, corpus) -> _Outcome:
    words = _words(text, lang)
    drawn = _draws(rng, len(words), p)
    if not any(drawn):
        return _Outcome(tokens=tuple(words), noop_reason=_no_draw_reason(len(words), p))
    pieces = []
    for word, repeat in zip(words, drawn):
        pieces.append(_Piece(word, False))
        if repeat:
            pieces.append(_Piece(word, True))
    return _render(pieces, lang)


def _removal(text, rng, p, lang, critical, corpus) -> _Outcome:
    words = _words(text, lang)
    # A token is removed when its draw lands in the top p of [0, 1) (see `_draws`).
    drawn = [rng.random() >= 1.0 - p for _ in words]
    if not any(drawn):
        return _Outcome(tokens=tuple(words), noop_reason=_no_draw_reason(len(words), p))
    if all(drawn):
        if len(words) == 1:
            return _Outcome(tokens=tuple(words), noop_reason="removing the only token would leave no caption")
        # A caption needs at least one word: keep one drawn token, chosen by the seed.
        drawn[rng.randrange(len(words))] = False
    pieces = [_Piece(None if remove else word, True if remove else False) for word, remove in zip(words, drawn)]
    return _render(pieces, lang)


def _masking(text, rng, p, lang, critical, corpus) -> _Outcome:
    words = _words(text, lang)
    drawn = _draws(rng, len(words), p)
    if not any(drawn):
        return _Outcome(tokens=tuple(words), noop_reason=_no_draw_reason(len(words), p))
    pieces = [_Piece(MASK_TOKEN, True) if mask else _Piece(word, False) for word, mask in zip(words, drawn)]
    return _render(pieces, lang)


def _shuffle_words(text, rng, lang) -> _Outcome:
    words = _words(text, lang)
    if len(set(words)) < 2:
        return _Outcome(tokens=tuple(words), noop_reason="fewer than two distinct tokens: no order to change")
    order = list(words)
    for _ in range(_MAX_SHUFFLES):
        rng.shuffle(order)
        if order != words:
            break
    else:
        return _Outcome(tokens=tuple(words), noop_reason="every shuffle left the order unchanged")
    return _render([_Piece(new, new != old) for new, old in zip(order, words)], lang)


def _jumble(text, rng, p, lang, critical, corpus) -> _Outcome:
    """PR-MCS jumble, UMIC word-order permutation: every token shuffled."""
    return _shuffle_words(text, rng, lang)


def _repeat_remove(text, rng, p, lang, critical, corpus) -> _Outcome:
    """UMIC: each word drawn with probability p is repeated or removed (50/50)."""
    words = _words(text, lang)
    actions = []
    for _ in words:
        drawn = rng.random() < p
        actions.append(("repeat" if rng.random() < 0.5 else "remove") if drawn else None)
    if not any(actions):
        return _Outcome(tokens=tuple(words), noop_reason=_no_draw_reason(len(words), p))
    if all(action == "remove" for action in actions):
        if len(words) == 1:
            return _Outcome(tokens=tuple(words), noop_reason="removing the only token would leave no caption")
        actions[rng.randrange(len(words))] = "repeat"
    pieces = []
    for word, action in zip(words, actions):
        if action == "remove":
            pieces.append(_Piece(None, True))
            continue
        pieces.append(_Piece(word, False))
        if action == "repeat":
            pieces.append(_Piece(word, True))
    return _render(pieces, lang)


# --- span-level operations (substitution, keyword substitution) -----------------------------


def _replace_slots(text: str, slots: list[tuple[int, int]], replacements: list[str]) -> _Outcome:
    """Write `replacements` into the character `slots` of `text` at once; spans of changes."""
    ordered = sorted(zip(slots, replacements))
    parts = []
    spans = []
    cursor = 0
    position = 0
    for (start, end), new in ordered:
        parts.append(text[cursor:start])
        position += start - cursor
        parts.append(new)
        if new != text[start:end]:
            spans.append((position, position + len(new)))
        position += len(new)
        cursor = end
    parts.append(text[cursor:])
    return _Outcome("".join(parts), spans, None)


def _find_slot(text: str, item: str, taken: list[tuple[int, int]], lang: str) -> tuple[int, int] | None:
    """Last occurrence of `item` in `text` not overlapping `taken` (as Algorithm 1's rsplit).

    Space-separated languages match whole words only; a case-insensitive match is the
    fallback when the exact spelling does not occur.
    """
    boundary = joiner(lang) != ""
    pattern = re.escape(item)
    if boundary:
        pattern = rf"(?<!\w){pattern}(?!\w)"
    for flags in (0, re.IGNORECASE):
        found = [m.span() for m in re.finditer(pattern, text, flags)]
        free = [span for span in found if all(span[1] <= s or span[0] >= e for s, e in taken)]
        if free:
            return free[-1]
    return None


def _critical_slots(text: str, objects: tuple[str, ...], lang: str) -> list[tuple[int, int]]:
    slots: dict[int, tuple[int, int]] = {}
    taken: list[tuple[int, int]] = []
    # Longer objects first so "スマホ" does not claim the inside of "黒いフレームのスマホ".
    for index in sorted(range(len(objects)), key=lambda i: (-len(objects[i]), i)):
        slot = _find_slot(text, objects[index], taken, lang)
        if slot is None:
            where = "in the caption" if _find_slot(text, objects[index], [], lang) is None else (
                "in the caption outside the other critical objects"
            )
            raise ValueError(f"critical object {objects[index]!r} does not occur {where}")
        slots[index] = slot
        taken.append(slot)
    return [slots[i] for i in range(len(objects))]


def _noun_slots(text: str, lang: str) -> list[tuple[int, int]]:
    """Character spans of nouns (adjacent nouns form one compound slot)."""
    slots: list[tuple[int, int]] = []
    previous: TaggedToken | None = None
    for token in tag(text, lang):
        is_noun = token.upos in NOUN_UPOS
        if is_noun and previous is not None and previous.upos in NOUN_UPOS and text[previous.end:token.start].strip() == "":
            slots[-1] = (slots[-1][0], token.end)
        elif is_noun:
            slots.append((token.start, token.end))
        previous = token
    return slots


def _substitution(text, rng, p, lang, critical, corpus) -> _Outcome:
    """PR-MCS in-sentence substitution: permute the critical objects' positions.

    With fewer than two critical objects the caption's nouns (found by the POS tagger) are
    permuted instead. Shuffles repeat until the order differs, as in Algorithm 1.
    """
    if critical is not None and len(critical) >= 2:
        slots = _critical_slots(text, critical, lang)
        source = "critical objects"
    else:
        slots = _noun_slots(text, lang)
        source = "nouns"
    contents = [text[start:end] for start, end in slots]
    if len(set(contents)) < 2:
        return _Outcome(noop_reason=f"fewer than two distinct {source} to swap")
    order = list(contents)
    for _ in range(_MAX_SHUFFLES):
        rng.shuffle(order)
        if order != contents:
            break
    else:
        return _Outcome(noop_reason=f"every shuffle left the {source} in place")
    return _replace_slots(text, slots, order)


class PosVocabulary:
    """Words of a corpus grouped by part of speech, for UMIC keyword substitution.

    Built once from a list of captions (tagging is the slow part), then reusable across
    many `perturb(..., corpus=vocabulary)` calls. Word lists are sorted so draws do not
    depend on insertion or hash order.

    `by_context=True` draws a word's replacements from the words seen between the same two
    neighbours instead (any keyword tag): "a small ? circle" takes the corpus's colours, "to
    the ? of" its sides. Part-of-speech classes mix colours with sizes ("a red red triangle")
    and taggers mislabel single words; a shared slot gives a fluent sentence that says
    something else, the hard negative a detail-sensitive metric needs.
    """

    def __init__(self, captions: Sequence[str], lang: str = "en", by_context: bool = False):
        self.lang = normalize_lang(lang)
        by_tag: dict[str, set[str]] = {}
        by_upos: dict[str, set[str]] = {}
        by_slot: dict[tuple[str, str], set[str]] = {}
        for caption in captions:
            if not caption or not caption.strip():
                continue
            tokens = tag(caption, self.lang)
            for k, token in enumerate(tokens):
                if token.upos in KEYWORD_UPOS:
                    by_tag.setdefault(token.tag, set()).add(token.text)
                    by_upos.setdefault(token.upos, set()).add(token.text)
                    if by_context:
                        by_slot.setdefault(_slot(tokens, k), set()).add(token.text)
        self.by_tag = {key: sorted(words) for key, words in sorted(by_tag.items())}
        self.by_upos = {key: sorted(words) for key, words in sorted(by_upos.items())}
        self.by_context = {key: sorted(words) for key, words in sorted(by_slot.items())} if by_context else None

    def alternatives(self, token: TaggedToken, slot: tuple[str, str] | None = None) -> list[str]:
        """Words with the token's fine tag (nouns fall back to any noun) other than itself; for
        a vocabulary `by_context`, the words seen in the token's `slot` (its neighbours)."""
        def others(words):
            return [w for w in words if w.casefold() != token.text.casefold()]

        if self.by_context is not None:
            return others(self.by_context.get(slot, []))
        same_tag = others(self.by_tag.get(token.tag, []))
        if same_tag or token.upos not in NOUN_UPOS:
            return same_tag
        return others(self.by_upos.get(token.upos, []))


def _slot(tokens: list[TaggedToken], k: int) -> tuple[str, str]:
    """Token k's neighbours, casefolded ("" at either end): where it sits in its sentence."""
    return (tokens[k - 1].text.casefold() if k else "", tokens[k + 1].text.casefold() if k + 1 < len(tokens) else "")


def _keyword_substitution(text, rng, p, lang, critical, corpus) -> _Outcome:
    """UMIC: replace a fraction p of the nouns, verbs and adjectives by same-POS words."""
    tokens = tag(text, lang)
    if isinstance(corpus, PosVocabulary):
        if corpus.lang != lang:
            raise ValueError(f"vocabulary is for {corpus.lang}, caption is {lang}")
        vocabulary = corpus
    elif corpus is None:
        vocabulary = PosVocabulary([text], lang)
    elif isinstance(corpus, str):
        raise ValueError("corpus must be a list of captions (or a PosVocabulary), not one string")
    else:
        vocabulary = PosVocabulary([*corpus, text], lang)
    keywords = [(t, _slot(tokens, k)) for k, t in enumerate(tokens) if t.upos in KEYWORD_UPOS]
    if not keywords:
        return _Outcome(noop_reason="the caption has no nouns, verbs or adjectives")
    replaceable = [(t, words) for t, slot in keywords if (words := vocabulary.alternatives(t, slot))]
    if not replaceable:
        return _Outcome(noop_reason="no other word between the same neighbours in the corpus" if vocabulary.by_context
                        is not None else "no other word of the same part of speech in the corpus (pass more "
                        "captions as corpus)")
    count = min(len(replaceable), max(1, round(p * len(keywords))))
    chosen = sorted(rng.sample(range(len(replaceable)), count))
    slots = [(replaceable[i][0].start, replaceable[i][0].end) for i in chosen]
    words = [rng.choice(replaceable[i][1]) for i in chosen]
    return _replace_slots(text, slots, words)


_OPERATIONS = {
    "repetition": _repetition,
    "removal": _removal,
    "masking": _masking,
    "jumble": _jumble,
    "substitution": _substitution,
    "keyword-substitution": _keyword_substitution,
    "repeat-remove": _repeat_remove,
}
assert tuple(_OPERATIONS) == ALL_OPS  # noqa: S101 - one list of operations
