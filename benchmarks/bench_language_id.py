"""Errors of CapLens's automatic language detection (`scoring.language_id.detect_language`)
against langid.py, the detector it replaced, on the same captions.

Two sets: the synthetic world's captions of held-out scenes (short and long, in en, de, fr, es
and ja, exact translations of one another) and a fixed list of short everyday captions in seven
languages (the kind on which langid was unsure). Each is run twice: with the default language
"en" (the app's, wrong for every non-English caption) and with the caption's own language as
the default (an annotator transcreating into it). The reference is langid's best guess among
the same LANGUAGES, without a prior (langid is not a CapLens dependency; it is measured when
installed: `pip install langid`).

    python benchmarks/bench_language_id.py [--scenes 150]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHORT_CAPTIONS = [
    ("fr", "un chat sur un canapé"), ("fr", "deux chiens jouent dans l'herbe"), ("fr", "une femme tient un parapluie"),
    ("fr", "un homme à vélo"), ("fr", "une voiture rouge"), ("fr", "le train arrive en gare"),
    ("fr", "des oiseaux dans le ciel"), ("es", "un perro en la playa"), ("es", "dos niños juegan al fútbol"),
    ("es", "una mujer con un paraguas rojo"), ("es", "un hombre en bicicleta"), ("es", "un coche rojo"),
    ("es", "el tren llega a la estación"), ("es", "pájaros en el cielo"), ("de", "ein Hund am Strand"),
    ("de", "zwei Kinder spielen Fußball"), ("de", "eine rote Katze"), ("en", "a dog on the beach"),
    ("en", "two kids playing soccer"), ("it", "un gatto sul divano"), ("pt", "um cachorro na praia"),
    ("nl", "een hond op het strand"),
]


def world_captions(scenes: int) -> list[tuple[str, str]]:
    from scoring.world.captions import scene_captions
    from scoring.world.sets import split_scenes

    return [(lang, caption.text) for scene in split_scenes("heldout", scenes)
            for per_lang in scene_captions(scene).values() for lang, caption in per_lang.items()]


def langid_among_languages():
    """langid's best guess among LANGUAGES, or None when langid is not installed."""
    try:
        from langid.langid import LanguageIdentifier, model
    except ImportError:
        return None
    from scoring.language_id import LANGUAGES

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    return lambda text, default: next(code for code, _ in identifier.rank(text) if code in LANGUAGES)


def errors(detect, captions, own_default: bool) -> tuple[int, list]:
    wrong = [(lang, text, found) for lang, text in captions
             if (found := detect(text, lang if own_default else "en")) != lang]
    return len(wrong), wrong


def main(argv=None) -> int:
    from scoring.language_id import DEFAULT_PRIOR, detect_language

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=150)
    args = parser.parse_args(argv)
    sets = {"world": world_captions(args.scenes), "short everyday": SHORT_CAPTIONS}
    detectors = {f"CapLens (Lingua, prior {DEFAULT_PRIOR})": detect_language}
    reference = langid_among_languages()
    if reference is not None:
        detectors["langid.py among LANGUAGES"] = reference
    print("| detector | set | captions | errors, default en | errors, default = own language | seconds |")
    print("|---|---|---|---|---|---|")
    examples = {}
    for name, detect in detectors.items():
        for set_name, captions in sets.items():
            started = time.perf_counter()
            (n_en, wrong_en), (n_own, _) = errors(detect, captions, False), errors(detect, captions, True)
            seconds = time.perf_counter() - started
            print(f"| {name} | {set_name} | {len(captions)} | {n_en} | {n_own} | {seconds:.2f} |")
            examples[(name, set_name)] = wrong_en[:3]
    if reference is None:
        print("\nlangid.py is not installed: no reference row (pip install langid).")
    print("\nFirst errors with default en:")
    for (name, set_name), wrong in examples.items():
        print(f"- {name}, {set_name}: " + ("; ".join(f"{text!r} ({lang}) as {found}" for lang, text, found in wrong) or "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
