"""Logged out, an action on a collection asks for a login first, not for a collection: there is
none to choose before a login (the Analyze tab said "Choose a collection." to a visitor)."""
from __future__ import annotations

import pytest

from annotation.people.acting import NotLoggedIn
from annotation.scores.collection_analysis import analyse_collection, collection_scores_for
from annotation.studies.agreement import dashboard
from annotation.studies.guidelines import write_guidelines
from annotation.studies.queue_screens import critical_screen, my_ratings, rating_screen


ACTIONS = [lambda who: analyse_collection(who, "", None, []), lambda who: collection_scores_for(who, "", None, []),
           lambda who: dashboard(who, ""), lambda who: write_guidelines(who, "", "text"),
           lambda who: rating_screen(who, ""), lambda who: my_ratings(who, ""), lambda who: critical_screen(who, "")]


@pytest.mark.parametrize("action", ACTIONS)
def test_logged_out_is_told_to_log_in_and_logged_in_to_choose_a_collection(engine, accounts, action):
    with pytest.raises(NotLoggedIn, match="^Log in first"):
        action(None)
    with pytest.raises(ValueError, match="^Choose a collection.$"):
        action(accounts["rita"].id)
