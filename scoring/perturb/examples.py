"""Worked examples from the papers, as data: demo inputs for the UI and fixtures for tests.

PR-MCS Figures 5 (EN), 12 (FR), 13 (DE), 14 (JA) and 15 (ES) show an M-FineCap3k caption,
its critical objects and its five perturbations. `substitution_seed` is the seed for which
`perturb(caption, "substitution", critical=critical, seed=...)` reproduces the figure's
substitution exactly (None where the figure's output is not a permutation of the critical
objects: Figure 15's swaps text outside its listed objects).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureExample:
    figure: str
    lang: str
    caption: str
    critical: tuple[str, ...]
    substitution: str
    substitution_seed: int | None
    repetition: str
    removal: str
    masking: str


PRMCS_FIGURES: dict[str, FigureExample] = {
    "en": FigureExample(
        "PR-MCS Figure 5",
        "en",
        "A man, wearing a white shirt and grey shorts, is playing golf on a green field with "
        "green trees and a blue sky in the background.",
        ("white shirt", "grey shorts", "golf", "green field"),
        "A man, wearing a golf and green field, is playing white shirt on a grey shorts with "
        "green trees and a blue sky in the background.",
        18,
        "A man, man, wearing a white white shirt and and grey shorts, shorts, is is playing "
        "playing golf on a a green field with green green trees and a a blue sky in the "
        "background.",
        "man, white and shorts, is playing a green trees a",
        "A [MASK] wearing a [MASK] shirt [MASK] grey [MASK] [MASK] [MASK] golf on [MASK] "
        "green field with [MASK] [MASK] and [MASK] blue sky in the background.",
    ),
    "fr": FigureExample(
        "PR-MCS Figure 12",
        "fr",
        "Un chat noir et un chat blanc allongés ensemble sur un matelas pour animaux de "
        "compagnie blanc et rose posé sur un tapis blanc.",
        ("chat noir", "chat blanc", "matelas pour animaux de compagnie blanc et rose"),
        "Un chat blanc et un matelas pour animaux de compagnie blanc et rose allongés "
        "ensemble sur un chat noir posé sur un tapis blanc.",
        1,
        "Un Un chat noir et et un un chat chat blanc blanc allongés allongés ensemble sur un "
        "un matelas pour pour animaux animaux de compagnie compagnie blanc et rose rose posé "
        "posé sur un tapis blanc.",
        "Un et un chat blanc allongés un pour animaux compagnie rose posé blanc.",
        "[MASK] chat noir [MASK] [MASK] [MASK] [MASK] ensemble sur [MASK] matelas [MASK] "
        "[MASK] de [MASK] blanc et [MASK] [MASK] sur un tapis [MASK]",
    ),
    "de": FigureExample(
        "PR-MCS Figure 13",
        "de",
        # The figure prints "Vor" in the original row and "vor" in every perturbed row.
        "vor einem weißen Hintergrund stehen mehrere Packungen und Flaschen, in den "
        "Packungen befinden sich Pralinen",
        ("Packungen", "Flaschen", "Pralinen"),
        "vor einem weißen Hintergrund stehen mehrere Packungen und Pralinen, in den "
        "Packungen befinden sich Flaschen",
        0,
        "vor vor einem weißen weißen Hintergrund stehen mehrere Packungen und Flaschen, in "
        "den Packungen Packungen befinden sich Pralinen Pralinen",
        "vor weißen Packungen Pralinen",
        "[MASK] einem [MASK] Hintergrund stehen mehrere Packungen und Flaschen, in den "
        "[MASK] [MASK] [MASK] befinden sich [MASK]",
    ),
    "es": FigureExample(
        "PR-MCS Figure 15",
        "es",
        "Hombre vistiendo un uniforme deportivo blanco con casco con protector facial y con "
        "guantes blancos, sosteniendo en la mano derecha un palo de cricket con fondo claro "
        "difuso",
        ("Hombre", "uniforme deportivo blanco", "casco con protector facial", "guantes"),
        "palo de cricket vistiendo un casco con protector facial con y guantes con uniforme "
        "deportivo blanco, sosteniendo en la mano derecha un Hombre blancos con fondo claro "
        "difuso",
        None,
        "Hombre vistiendo vistiendo un uniforme uniforme deportivo blanco con con casco "
        "casco con protector facial facial y con guantes blancos, blancos, sosteniendo en en "
        "la mano derecha un palo de cricket con con fondo fondo claro claro claro difuso "
        "difuso",
        "vistiendo uniforme con casco facial blancos, en con fondo claro difuso",
        "Hombre [MASK] un [MASK] deportivo blanco [MASK] [MASK] con protector [MASK] y con "
        "guantes [MASK] sosteniendo [MASK] la mano derecha un palo de cricket [MASK] [MASK] "
        "[MASK] [MASK]",
    ),
    "ja": FigureExample(
        "PR-MCS Figure 14",
        "ja",
        "無地の白色を背景として、黒いフレームのスマホがあり、画面には空と海のような青色と黄色に"
        "黒い陸と人影が浮かんでいて、紫色のタッチペンがスマホに立てかけられている。",
        ("黒いフレームのスマホ", "空と海のような青色と黄色", "黒い陸", "人影", "紫色のタッチペン", "スマホ"),
        "無地の白色を背景として、空と海のような青色と黄色があり、画面には黒い陸に黒いフレームの"
        "スマホと紫色のタッチペンが浮かんでいて、スマホが人影に立てかけられている。",
        202,
        "無地無地のの白色白色を背景として、黒いフレームのスマホがありあり、画面には空と海海のような"
        "青色とと黄色に黒い黒い陸と人影が浮かん浮かんでいて、紫色色のタッチペンがスマホに立てかけ"
        "られている。",
        "無地の白色をして、あり、海青と黒いが浮かんでて色で",
        "[MASK][MASK][MASK][MASK]背景と[MASK][MASK][MASK]黒いフレームのスマホが[MASK][MASK]"
        "画面には空と[MASK]のような[MASK]色[MASK]黄色に[MASK]陸と人影[MASK][MASK][MASK]い"
        "[MASK]、紫[MASK]のタッチペンがスマホに立てかけられ[MASK]いる。",
    ),
}

# SPECS captions: the §4.2 segmentation examples and the Figure 1 scene, whose units must
# concatenate back to the caption.
SPECS_CAPTIONS: dict[str, str] = {
    "statue": "A front view of a statue on cement in a park.",
    "box": "To the left of the car there is a box.",
    "cat": (
        "A grey cat is lying on a sofa in a bright living room. The cat is partially tucked "
        "under a blanket with fringed edges, and a lamp stands on a table to the left."
    ),
}
