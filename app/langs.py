"""The language dropdown: "detect automatically" and the languages `scoring.language_id` knows."""
from __future__ import annotations

from scoring.language_id import AUTO, LANGUAGES


def language_choices(with_auto: bool = True) -> list[tuple[str, str]]:
    """(label, code) pairs for a Gradio dropdown."""
    choices = [(f"{name} ({code})", code) for code, name in LANGUAGES.items()]
    return ([("detect automatically", AUTO)] if with_auto else []) + choices
