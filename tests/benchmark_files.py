"""Writers of small benchmark files in their published formats, shared by the analysis tests
and the app's upload tests."""
from __future__ import annotations

import numpy as np


def _cell(strings):
    cell = np.empty((1, len(strings)), dtype=object)
    for index, text in enumerate(strings):
        cell[0, index] = text
    return cell


def write_pascal50s(folder, pairs, categories, winners, references):
    """pair_pascal.mat and consensus_pascal.mat in `folder`: `pairs` (image, A, B), one judgement
    per entry of `winners[i]` (1: A, 2: B) with reference `references[i][j]`."""
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    entries = np.empty((1, len(pairs)), dtype=object)
    for index, pair in enumerate(pairs):
        entries[0, index] = _cell(pair)
    savemat(folder / "pair_pascal.mat", {"new_input": entries, "category": np.array([categories])})
    judgements = [(index, judge, winner) for index, wins in enumerate(winners) for judge, winner in enumerate(wins)]
    triplets = np.empty((1, len(judgements)), dtype=[("A", "O"), ("B", "O"), ("C", "O"), ("D", "O")])
    for position, (index, judge, winner) in enumerate(judgements):
        triplets[0, position] = (references[index][judge], pairs[index][1], pairs[index][2],
                                 np.array([[float(winner)]]))
    savemat(folder / "consensus_pascal.mat", {"triplets": triplets})
    return folder
