"""benchmarks/mutation.py --recheck plants a recorded survivor back into today's code: inside
its own function or method only, and not at all where the lines are gone."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("mutation", Path(__file__).resolve().parents[1] / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)

SOURCE = '''def first(
    seed: int,
) -> int:
    rng = make(seed)
    return rng


class Pool:
    def first(self, seed):
        rng = make(seed)
        return rng

    def other(self):
        return 1


def last(seed):
    rng = make(seed)
    return rng
'''


def survivor(name, old, new):
    return {"mutant": f"pkg.mod.{name}__mutmut_3", "change": [f"-{old}", f"+{new}"]}


def test_a_survivor_is_planted_in_its_own_function_past_a_multi_line_signature():
    planted = mutation.plant(SOURCE, survivor("x_first", "    rng = make(seed)", "    rng = make(None)"))
    assert planted.splitlines()[3] == "    rng = make(None)"
    assert planted.count("make(None)") == 1 and planted.count("make(seed)") == 2
    planted = mutation.plant(SOURCE, survivor("x_last", "    rng = make(seed)", "    rng = make(None)"))
    assert planted.splitlines()[-2] == "    rng = make(None)" and planted.count("make(None)") == 1


def test_a_method_survivor_is_planted_in_its_class_only():
    planted = mutation.plant(SOURCE, survivor("xǁPoolǁfirst", "        rng = make(seed)", "        rng = make(None)"))
    assert planted.splitlines()[9] == "        rng = make(None)" and planted.count("make(None)") == 1


def test_lines_that_are_gone_or_in_another_function_are_not_planted():
    assert mutation.plant(SOURCE, survivor("x_first", "    rng = make(other)", "    rng = None")) is None
    assert mutation.plant(SOURCE, survivor("xǁPoolǁother", "        rng = make(seed)", "        rng = None")) is None
    assert mutation.plant(SOURCE, survivor("x_missing", "    rng = make(seed)", "    rng = None")) is None
