"""SPECS detail units and the positive/negative triplets built from them.

A detail unit (SPECS §3.1) is a phrase that adds at least one new visual detail and fits
the context before it; a caption is the ordered concatenation d1 + ... + dm, and every
prefix c_j = d1 + ... + dj is itself a valid caption. The segmentation follows SPECS §4.2
and appendix A: chunk with a POS grammar (noun phrases, prepositional phrases, verb
phrases, clauses, conjunctions), split between chunks, then undo the splits the paper's
three rules forbid, preferring a missed split to a wrong one:

1. a sentence-initial noun phrase starting with a definite article ("The cat") is not split
   off: it likely repeats an entity mentioned before;
2. a prepositional phrase is not split from the noun phrase before it (it modifies it);
3. a segment starting with a prepositional phrase and containing no verb stays with what
   follows ("To the left of the car there is a box").

The grammar works on Universal POS tags, so it serves every language with a tagger
(`scoring.perturb.pos`); Japanese, which is head-final, is split after its commas (読点) instead
and rule 3 becomes "a segment without a predicate stays with what follows".
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scoring.perturb.pos import TaggedToken, tag
from scoring.perturb.tokenize import detokenize, joiner, normalize_lang, tokenize

SENTENCE_END = frozenset({".", "!", "?", "。", "！", "？"})
COMMAS = frozenset({",", ";", "、", "，", ":"})
CONTENT_UPOS = frozenset({"NOUN", "PROPN", "ADJ", "VERB", "NUM"})
NOUN_END_UPOS = frozenset({"NOUN", "PROPN", "NUM"})
PREDICATE_UPOS = frozenset({"VERB", "AUX"})
COMPLEMENT_UPOS = frozenset({"DET", "NOUN", "PROPN", "PRON", "NUM", "ADJ", "ADP"})
NOUN_PHRASE_UPOS = frozenset({"DET", "ADJ", "NOUN", "PROPN", "NUM", "PRON"})
NOUN_COMPLEMENT_PREPOSITIONS = frozenset({"of", "de", "du", "des", "d'", "d’", "del", "von", "vom"})
# Words that can open a new phrase after a conjunction.
PHRASE_START_UPOS = frozenset({"DET", "NOUN", "PROPN", "PRON", "NUM", "ADJ", "VERB", "AUX", "ADP"})
DEFINITE_ARTICLES = {
    "en": {"the"},
    "de": {"der", "die", "das", "den", "dem", "des"},
    "fr": {"le", "la", "les", "l'", "l’"},
    "es": {"el", "la", "los", "las"},
}

SHUFFLE_RATIO = 0.9  # SPECS: share of negative units shuffled at the token level


def detail_units(text: str, lang: str = "en") -> list[str]:
    """Split `text` into ordered detail units whose concatenation is exactly `text`."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("caption text is empty: nothing to segment")
    code = normalize_lang(lang)
    tokens = tag(text, code)
    if not tokens:
        return [text]
    if code == "ja":
        groups = _japanese_groups(tokens)
    else:
        groups = _grammar_groups(tokens, code)
    # Each unit runs from the end of the previous unit's last token to the end of its own,
    # so leading whitespace belongs to the unit it precedes and nothing is lost.
    units = []
    start = 0
    for index, group in enumerate(groups):
        end = len(text) if index == len(groups) - 1 else tokens[group[-1]].end
        units.append(text[start:end])
        start = end
    return units


# --- segmentation -------------------------------------------------------------------------


def _sentences(tokens: Sequence[TaggedToken]) -> list[list[int]]:
    sentences: list[list[int]] = [[]]
    for index, token in enumerate(tokens):
        sentences[-1].append(index)
        if token.text in SENTENCE_END and index + 1 < len(tokens):
            sentences.append([])
    return [s for s in sentences if s]


def _ends_noun_phrase(tokens: Sequence[TaggedToken], index: int) -> bool:
    """Does token `index` close a noun phrase (a noun, possibly followed by adjectives)?"""
    while index >= 0 and tokens[index].upos == "ADJ":
        index -= 1
    return index >= 0 and tokens[index].upos in NOUN_END_UPOS


def _opens_unit(tokens: Sequence[TaggedToken], i: int) -> bool:
    """Chunk boundaries of the grammar where a new unit may start (before token i)."""
    token, previous = tokens[i], tokens[i - 1]
    if previous.text in COMMAS:
        return token.upos != "PUNCT"
    if token.upos == "CCONJ":  # CONJ: <CC><NP|VP|PP|CLAUSE>, not "black and white"
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is None or following.upos not in PHRASE_START_UPOS:
            return False
        if following.upos == "ADJ":  # "blanc et rose" joins adjectives, "and grey shorts" an NP
            j = i + 1
            while j < len(tokens) and tokens[j].upos == "ADJ":
                j += 1
            if j == len(tokens) or tokens[j].upos not in NOUN_END_UPOS:
                return False
        if previous.upos == "ADJ":  # "chat noir et ..." closes a noun phrase, "black and" not
            return _ends_noun_phrase(tokens, i - 1)
        return previous.upos not in ("ADV", "DET", "CCONJ", "ADP")
    if token.upos == "ADP" and i + 1 < len(tokens) and tokens[i + 1].upos in NOUN_PHRASE_UPOS:
        return _pp_may_split(tokens, i)
    if token.relative or token.upos == "SCONJ":  # a clause opens (not inside "tandis que")
        return previous.upos not in ("ADP", "ADV", "SCONJ", "CCONJ")
    if token.upos in PREDICATE_UPOS and previous.upos not in PREDICATE_UPOS:
        # CLAUSE: <NP><VP>: a verb phrase after a noun phrase adds a detail of its own, but
        # only a verb with a complement makes a VP (<VB.*><NP|PP|CLAUSE>+).
        return _ends_noun_phrase(tokens, i - 1) and _has_complement(tokens, i)
    return False


def _pp_may_split(tokens: Sequence[TaggedToken], i: int) -> bool:
    """May the prepositional phrase at token i become a unit of its own?

    Rule 2 keeps a PP with the noun phrase it modifies ("a red square on a table",
    "A front view of a statue"). A PP that follows another PP attached to a verb ("tucked
    under a blanket | with fringed edges", SPECS Figure 1), or that ends a chain of two or
    more PPs ("A front view of a statue on cement | in a park", §4.2 case a), adds a detail
    of its own. Noun complements ("of", "de") never split.
    """
    if tokens[i].text.casefold() in NOUN_COMPLEMENT_PREPOSITIONS:
        return False
    chain, j = 0, i - 1
    while True:
        k = j
        while k >= 0 and tokens[k].upos in NOUN_PHRASE_UPOS:
            k -= 1
        if k == j or k < 0 or tokens[k].upos != "ADP":
            break
        chain, j = chain + 1, k - 1
    if chain == 0:
        return False
    anchor = tokens[j] if j >= 0 else None
    return chain >= 2 or (anchor is not None and anchor.upos in PREDICATE_UPOS)


def _has_complement(tokens: Sequence[TaggedToken], i: int) -> bool:
    """Is the verb group starting at token i followed by a noun or prepositional phrase?"""
    j = i
    while j < len(tokens) and tokens[j].upos in ("VERB", "AUX", "ADV", "PART"):
        j += 1
    return j < len(tokens) and tokens[j].upos in COMPLEMENT_UPOS


def _has(tokens, group, upos_set) -> bool:
    return any(tokens[i].upos in upos_set for i in group)


def _first_word(tokens, group) -> TaggedToken | None:
    words = [tokens[i] for i in group if tokens[i].upos not in ("PUNCT", "SYM")]
    return words[0] if words else None


def _grammar_groups(tokens: Sequence[TaggedToken], lang: str) -> list[list[int]]:
    articles = DEFINITE_ARTICLES.get(lang, set())
    groups: list[list[int]] = []
    for sentence in _sentences(tokens):
        units: list[list[int]] = [[sentence[0]]]
        for i in sentence[1:]:
            # Units start only where a space separates words ("l'homme" stays whole).
            if tokens[i].start > tokens[i - 1].end and _opens_unit(tokens, i):
                units.append([i])
            else:
                units[-1].append(i)
        units = _merge_rules(tokens, units, articles)
        groups.extend(units)
    return _merge_empty(tokens, groups)


def _merge_rules(tokens, units: list[list[int]], articles: set[str]) -> list[list[int]]:
    # Rule 1: keep a sentence-initial definite noun phrase with what follows.
    if len(units) > 1:
        first = _first_word(tokens, units[0])
        if (
            first is not None
            and first.text.casefold() in articles
            and not _has(tokens, units[0], PREDICATE_UPOS)
        ):
            units[0:2] = [units[0] + units[1]]
    # Rules 2 and 3 concern a verbless prepositional segment cut off by a comma or opening
    # the sentence ("In the background, | there is ..."). Prepositional units split by the
    # grammar itself (see `_pp_may_split`) already passed rule 2 and stay.
    loose = [
        _starts_with_preposition(tokens, unit)
        and not _has(tokens, unit, PREDICATE_UPOS)
        and (index == 0 or tokens[units[index - 1][-1]].text in COMMAS)
        for index, unit in enumerate(units)
    ]
    # Rule 3: it stays with the segment after it.
    forward: list[list[int]] = []
    forward_loose: list[bool] = []
    carry: list[int] = []
    for index, unit in enumerate(units):
        merged = carry + unit
        # Keep carrying until the segment holds a verb ("In the foreground, two children
        # are building ...").
        pending = loose[index] or (carry and not _has(tokens, merged, PREDICATE_UPOS))
        if pending and index < len(units) - 1:
            carry = merged
            continue
        forward.append(merged)
        forward_loose.append(loose[index] and not carry)
        carry = []
    # Rule 2: at the end of the sentence, it stays with the noun phrase before it.
    result: list[list[int]] = []
    for unit, is_loose in zip(forward, forward_loose):
        if result and is_loose:
            before = [i for i in result[-1] if tokens[i].upos not in ("PUNCT", "SYM")]
            if before and _ends_noun_phrase(tokens, before[-1]):
                result[-1] = result[-1] + unit
                continue
        result.append(unit)
    return result


def _starts_with_preposition(tokens, unit: list[int]) -> bool:
    first = _first_word(tokens, unit)
    return first is not None and first.upos == "ADP"


def _japanese_groups(tokens: Sequence[TaggedToken]) -> list[list[int]]:
    groups: list[list[int]] = []
    for sentence in _sentences(tokens):
        units: list[list[int]] = [[sentence[0]]]
        for i in sentence[1:]:
            if tokens[i - 1].text in COMMAS and tokens[i].upos != "PUNCT":
                units.append([i])
            else:
                units[-1].append(i)
        # Rule 3 for a head-final language: a segment without a predicate (verb, adjective,
        # copula) modifies what follows, so it stays with it.
        result: list[list[int]] = []
        carry: list[int] = []
        for index, unit in enumerate(units):
            unit = carry + unit
            carry = []
            if index < len(units) - 1 and not _has(tokens, unit, {"VERB", "AUX", "ADJ"}):
                carry = unit
                continue
            result.append(unit)
        groups.extend(result)
    return _merge_empty(tokens, groups)


def _merge_empty(tokens, groups: list[list[int]]) -> list[list[int]]:
    """A unit must carry a content word; otherwise it joins its neighbour."""
    merged: list[list[int]] = []
    for group in groups:
        if merged and not _has(tokens, group, CONTENT_UPOS):
            merged[-1] = merged[-1] + group
        else:
            merged.append(group)
    if len(merged) > 1 and not _has(tokens, merged[0], CONTENT_UPOS):
        merged[0:2] = [merged[0] + merged[1]]
    return merged


# --- triplets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecsTriplet:
    """A SPECS minimal pair around one base caption c_j of caption `caption_index`.

    positive = c_j + d_(j+1) (the caption's own next unit); negative = c_j + d- where d-
    is a unit of another caption (`negative_source`), token-shuffled when `shuffled`.
    """

    caption_index: int
    unit_index: int
    base: str
    positive: str
    negative: str
    negative_unit: str
    negative_source: int
    shuffled: bool

    def to_dict(self) -> dict:
        return asdict(self)


def append_unit(base: str, unit: str, lang: str = "en") -> str:
    """c_j + d: `unit` appended to `base`, with one space where the language uses them."""
    separator = joiner(lang)
    unit = unit.strip()
    if separator and base and not base[-1].isspace():
        return base + separator + unit
    return base + unit


def shuffle_unit(unit: str, rng: random.Random, lang: str = "en") -> str:
    """`unit` with its tokens in a new random order (unchanged if it has one distinct token)."""
    words = tokenize(unit, lang)
    if len(set(words)) < 2:
        return detokenize(words, lang)
    order = list(words)
    while order == words:
        rng.shuffle(order)
    return detokenize(order, lang)


def specs_triplets(
    captions: Sequence[str],
    *,
    lang: str = "en",
    seed: int = 0,
    shuffle_ratio: float = SHUFFLE_RATIO,
    image_ids: Sequence[str] | None = None,
) -> list[SpecsTriplet]:
    """Positive and negative triplets for every prefix of every caption in a batch.

    For caption j with units d1..dm and each k < m: base c_k, positive c_k + d_(k+1), and
    negative c_k + d- with d- drawn from another caption of the batch (of another image
    when `image_ids` are given) and token-shuffled with probability `shuffle_ratio`.
    """
    if not 0.0 <= shuffle_ratio <= 1.0:
        raise ValueError(f"shuffle_ratio must be between 0 and 1, got {shuffle_ratio}")
    if image_ids is not None and len(image_ids) != len(captions):
        raise ValueError("image_ids must have one entry per caption")
    code = normalize_lang(lang)
    rng = random.Random(seed)
    segmented = [detail_units(caption, code) for caption in captions]
    triplets = []
    for j, units in enumerate(segmented):
        donors = [
            i for i in range(len(captions))
            if i != j and (image_ids is None or image_ids[i] != image_ids[j])
        ]
        if not donors:
            raise ValueError("negative units need a caption of another image in the batch")
        for k in range(1, len(units)):
            base = "".join(units[:k])
            positive = "".join(units[: k + 1])
            source = rng.choice(donors)
            unit = rng.choice(segmented[source]).strip()
            shuffled = False
            if rng.random() < shuffle_ratio:
                original = unit
                unit = shuffle_unit(unit, rng, code)
                shuffled = unit != original
            triplets.append(
                SpecsTriplet(j, k, base, positive, append_unit(base, unit, code), unit, source, shuffled)
            )
    return triplets
