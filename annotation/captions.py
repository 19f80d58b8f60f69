"""Collections and their captions: create, read, validate, delete.

Each function takes an open `Session` (the caller owns the transaction, e.g.
`annotation.database.database_session()`) and, where it changes data, the acting `User`,
whose role it checks itself (annotation.people.accounts): collections, captions and deletion are
researcher or admin actions. Bad input raises ValueError, unknown names LookupError.
"""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from annotation.people.accounts import ALL_ROLES, RESEARCH_ROLES, require_role
from db.models import CAPTION_KINDS, Caption, Collection, Image, User, collection_captions
from scoring.paths import check_caption_length


def get_collection(session: Session, name: str) -> Collection:
    collection = session.scalar(select(Collection).where(Collection.name == name))
    if collection is None:
        raise LookupError(f"no collection named {name!r}")
    return collection


def list_collections(session: Session, user: User) -> list[Collection]:
    require_role(user, *ALL_ROLES)
    return list(session.scalars(select(Collection).order_by(Collection.name)))


def get_or_create_collection(session: Session, user: User, name: str, description: str | None = None) -> Collection:
    require_role(user, *RESEARCH_ROLES)
    name = validate_collection_name(name)
    collection = session.scalar(select(Collection).where(Collection.name == name))
    if collection is None:
        collection = Collection(name=name, description=description, created_by_id=user.id)
        session.add(collection)
        session.flush()
    return collection


# The bidirectional embedding, override and isolate controls (LRE, RLE, PDF, LRO, RLO; LRI, RLI,
# FSI, PDI). They reorder how the text around them is shown, so what an annotator reads can differ
# from what is stored and scored ("Trojan Source", CVE-2021-42574). The plain marks U+200E and
# U+200F stay allowed: they only set the direction of neutral characters such as punctuation.
BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


def refuse_control_characters(text: str, what: str, *, allowed: str = "") -> str:
    """`text` unchanged; ValueError naming the first control character (C0 but for `allowed`,
    DEL, C1 or a bidirectional control) by its code point and 1-based position."""
    for position, ch in enumerate(text, 1):
        if ch in BIDI_CONTROLS:  # shows the text in another order than it is stored
            kind = "bidirectional control character"
        elif (ord(ch) < 32 and ch not in allowed) or 127 <= ord(ch) <= 159:  # a NUL or escape code is no
            kind = "control character"  # text and cuts it short in C-based tools; C1 codes are mojibake
        else:
            continue
        raise ValueError(f"{what} holds the {kind} U+{ord(ch):04X} at position {position}")
    return text


def validate_caption_text(text: str) -> str:
    """`text` exactly as given (leading and trailing spaces kept: a caption is stored byte for
    byte); ValueError when it is blank, holds a control character or is over the caption length
    limit."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("caption text is empty")
    refuse_control_characters(text, "caption text", allowed="\t\n\r")
    return check_caption_length(text, "caption")


def validate_collection_name(name: str) -> str:
    """A collection's (a study's) name, stripped: 1-200 characters, no control characters."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValueError("collection name must be 1-200 characters")
    return refuse_control_characters(name, "collection name")


# ISO 639-1, the two-letter language codes (a caption's language is one, optionally with a
# region or script subtag: pt-BR, zh-Hant), and "und" for text in no language (BCP 47).
ISO_639_1 = frozenset("""
aa ab ae af ak am an ar as av ay az ba be bg bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee el
en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io is it
iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt
my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl
sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo
za zh zu und""".split())


def validate_language(language: str) -> str:
    """A caption's language code: ISO 639-1 (or "und"), optionally with subtags (pt-BR), in its
    canonical form. ValueError for anything else, so a typo such as "xx" never becomes a
    language, and "EN" or "pt_BR" is never a language apart from "en" and "pt-BR". Those are
    refused, naming the canonical form, rather than rewritten, so a file or a caller learns the
    one spelling (stored codes were rewritten in it by migration 0012)."""
    language = (language or "").strip()
    if not language or len(language) > 16 or not all(ch.isalnum() or ch in "-_" for ch in language):
        raise ValueError(f"invalid language code {language!r} (use e.g. en, de, ja, pt-BR)")
    primary, *subtags = language.replace("_", "-").split("-")
    if primary.lower() not in ISO_639_1 or any(not 2 <= len(tag) <= 8 for tag in subtags):
        raise ValueError(f"unknown language code {language!r}: use an ISO 639-1 code such as en, de, ja, "
                         "or one with a region, such as pt-BR")
    canonical = "-".join([primary.lower(), *map(_canonical_subtag, subtags)])
    if language != canonical:
        raise ValueError(f"language code {language!r} is not in its canonical form: write {canonical!r} "
                         "(lowercase language, '-', uppercase region)")
    return language


def _canonical_subtag(tag: str) -> str:
    """BCP 47 case: a script title case (Hant), a region upper case (BR, 419), others lower case."""
    if len(tag) == 4 and tag.isalpha():
        return tag.title()
    if (len(tag) == 2 and tag.isalpha()) or (len(tag) == 3 and tag.isdigit()):
        return tag.upper()
    return tag.lower()


def add_caption(session: Session, user: User, image: Image, text: str, *, language: str = "en",
                kind: str = "candidate", source_model: str | None = None, parent: Caption | None = None,
                perturbation: dict | None = None, collection: Collection | None = None,
                external_id: str | None = None, import_id: int | None = None) -> Caption:
    """Add a caption of `image` (researcher or admin), optionally into `collection`."""
    require_role(user, *RESEARCH_ROLES)
    if kind not in CAPTION_KINDS:
        raise ValueError(f"unknown caption kind {kind!r}: choose one of {', '.join(CAPTION_KINDS)}")
    if kind == "perturbed" and (parent is None or not perturbation or not perturbation.get("op")):
        raise ValueError("a perturbed caption needs its parent caption and the perturbation (op, parameters)")
    caption = Caption(
        image=image, text=validate_caption_text(text), language=validate_language(language), kind=kind,
        source_model=source_model, parent=parent,
        perturbation_op=(perturbation or {}).get("op"), perturbation=perturbation,
        external_id=external_id, import_id=import_id, created_by_id=user.id,
    )
    session.add(caption)
    if collection is not None:
        caption.collections.append(collection)
    session.flush()
    return caption


def get_caption(session: Session, caption_id: int) -> Caption:
    caption = session.get(Caption, caption_id)
    if caption is None:
        raise LookupError(f"no caption with id {caption_id}")
    return caption


def image_references(session: Session, image_ids, language: str | None = None) -> dict[tuple[int, str], list[str]]:
    """Reference texts of the images, by (image id, language), first stored first. Each text
    once: an image imported into two collections has its references stored once per import,
    and exports, fine-tuning sets and the rating screen listed them twice."""
    ids = sorted(set(image_ids))
    refs: dict[tuple[int, str], list[str]] = {}
    for start in range(0, len(ids), 500):
        query = (select(Caption.image_id, Caption.language, Caption.text)
                 .where(Caption.kind == "reference", Caption.image_id.in_(ids[start:start + 500]))
                 .group_by(Caption.image_id, Caption.language, Caption.text).order_by(func.min(Caption.id)))
        if language is not None:
            query = query.where(Caption.language == language)
        for image_id, lang, text in session.execute(query):
            refs.setdefault((image_id, lang), []).append(text)
    return refs


def in_collection(collection: Collection):
    return Caption.id.in_(
        select(collection_captions.c.caption_id).where(collection_captions.c.collection_id == collection.id)
    )
