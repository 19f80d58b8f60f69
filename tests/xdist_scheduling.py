"""How the suite spreads over pytest-xdist workers (`-n 2 --dist loadgroup`, the README's
command): whole modules, so that a module-scoped server or Ray cluster starts once, and every
browser module (its file name says `browser`; conftest holds each browser test to that) on one
worker after another, so that one Chromium at a time squeezes the timing of typing and live
scores on a 2-core machine. (pytest 9 keeps xdist's own `xdist_group` from reaching the
scheduler, so the grouping reads the file name.)"""
from __future__ import annotations

from pathlib import PurePosixPath

BROWSER_GROUP = "browser"


def scope_of(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return BROWSER_GROUP if BROWSER_GROUP in PurePosixPath(module).name else module


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
