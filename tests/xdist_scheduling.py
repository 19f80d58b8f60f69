"""How the suite spreads over pytest-xdist workers (`-n 3 --dist loadgroup`, the README's
command): whole modules, so that a module-scoped server or Ray cluster starts once, and the
browser modules (the file name says `browser`; conftest holds each browser test to that) in two
lanes, each lane's modules one after another on one worker. A browser test mostly waits on
Gradio's frontend (about half a core), so a third worker uses the CPU it leaves, and two lanes
keep at most two Chromiums beside the typing and live-score timing on a 2-core machine.
(pytest 9 keeps xdist's own `xdist_group` from reaching the scheduler, so the grouping reads
the file name.)"""
from __future__ import annotations

from pathlib import PurePosixPath

BROWSER_GROUP = "browser"
# Modules of the second lane, chosen so that the lanes take about as long (serial seconds of a
# full run: 470 and 460); any other browser module runs in the first.
SECOND_LANE = frozenset({"test_app_study_browser.py", "test_app_annotate_browser.py", "test_app_browser_typing.py",
                         "test_app_browser_accounts.py", "test_app_browser_perturb.py",
                         "test_app_analyze_files_browser.py"})


def scope_of(nodeid: str) -> str:
    """The unit one worker runs: a browser lane, or the test's module."""
    module = PurePosixPath(nodeid.split("::", 1)[0])
    if BROWSER_GROUP not in module.name:
        return str(module)
    return f"{BROWSER_GROUP}-2" if module.name in SECOND_LANE else f"{BROWSER_GROUP}-1"


def is_browser_scope(scope: str) -> bool:
    return scope.startswith(f"{BROWSER_GROUP}-")


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    # In collection order (conftest puts the longest modules first), not xdist's default of the
    # most tests first, which started the Space's one long test last.
    config.option.loadscopereorder = False
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndBrowser(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ModulesAndBrowser(config, log)
