"""Collections as the Score tab and the Perturbation lab use them: pick a stored image with
its captions to score, and keep an image, its caption, critical objects and perturbations.

Each function is one transaction as the acting account (`annotation.people.acting`); reading and
writing collections is a researcher or admin action, checked by the workflow functions.
"""
from __future__ import annotations

from typing import Sequence

from annotation import captions

from annotation.studies import tasks
from annotation.perturbations import store_perturbation
from annotation.people.acting import acting
from annotation.transfer.exporters import captions_table
from annotation.image_store import add_image
from scoring.language_id import AUTO


def collection_images(account_id: int | None, collection_name: str) -> dict[str, dict]:
    """The images of a collection by sha256: stored file, display name, candidate captions,
    references, and `language`: the candidates' language when they share one, else "auto"."""
    with acting(account_id, read_only=True) as (session, user):
        rows = captions_table(session, user, captions.get_collection(session, collection_name))
    images: dict[str, dict] = {}
    for row in rows:
        entry = images.setdefault(row["image_sha256"], {
            "file": row["image_file"], "name": row["image_filename"] or row["image_sha256"][:12],
            "captions": [], "references": list(row["references"]), "languages": set()})
        if row["kind"] == "candidate":
            entry["captions"].append(row["caption"])
            entry["languages"].add(row["language"])
    for entry in images.values():
        languages = entry.pop("languages")
        entry["language"] = next(iter(languages)) if len(languages) == 1 else AUTO
    return images


def save_perturbations(account_id: int | None, image_bytes: bytes | None, image_name: str, original: str, lang: str,
                       perturbations: Sequence, collection_name: str, critical: Sequence[str] | None) -> str:
    """Store the image, the original caption (as a candidate), its critical objects and the
    perturbed captions that changed something, with their provenance, in `collection_name`;
    returns a sentence saying what was saved."""
    if image_bytes is None:
        raise ValueError("Upload the image first: stored captions belong to an image.")
    if not perturbations:
        raise ValueError("Run a perturbation first.")
    if not (collection_name or "").strip():
        raise ValueError("Name the collection to save into.")
    with acting(account_id) as (session, user):
        collection = captions.get_or_create_collection(session, user, collection_name.strip())
        stored_image = add_image(session, image_bytes, original_filename=image_name)
        parent = captions.add_caption(session, user, stored_image, original, language=lang, kind="candidate",
                                collection=collection)
        if critical:
            tasks.mark_critical(session, user, parent.id, list(critical))
        saved = [store_perturbation(session, user, parent, pert, collection=collection)
                 for pert in perturbations if not pert.noop]
        return (f"Saved caption {parent.id} and {len(saved)} perturbed caption(s) into {collection.name}"
                + (f", with {len(critical)} critical object(s)." if critical else "."))


def collection_frequencies_label(collection_name: str) -> str:
    """The label of `collection_document_frequency`'s result: where its frequencies come from."""
    return f"collection {collection_name!r}"


def collection_document_frequency(account_id: int | None, collection_name: str):
    """CIDEr-D document frequencies over the reference sets of a collection's images, for the
    Score tab (`scoring.session_scoring.DocumentFrequencies`). ValueError when it has none."""
    from scoring.metrics.base import MetricUnavailable
    from scoring.metrics.coco import reference_document_frequency
    from scoring.session_scoring import DocumentFrequencies

    images = collection_images(account_id, collection_name)
    sets = [entry["references"] for entry in images.values() if entry["references"]]
    if not sets:
        raise ValueError(f"Collection {collection_name!r} has no references to count document frequencies from.")
    try:
        frequencies = reference_document_frequency(sets)
    except MetricUnavailable as exc:
        raise ValueError(f"Cannot count document frequencies: {exc}") from None
    return DocumentFrequencies(collection_frequencies_label(collection_name), frequencies)
