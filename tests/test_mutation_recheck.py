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


def test_a_resumed_run_keeps_its_copy_and_a_new_run_takes_a_fresh_one(tmp_path):
    """--resume: the copy (and mutmut's record inside it) of an earlier sitting is used as it is,
    so the mutants already tested are not tested again on other code; without it the copy is new."""
    import json

    module, tests = "scoring/fingerprint.py", ["tests/test_mutation_recheck.py"]
    work = mutation._scratch_copy(module, tests, tmp_path)
    record = json.loads((work / mutation.COPY_RECORD).read_text())
    assert record["copied_at"].endswith("Z") and (record["commit"] is None or len(record["commit"]) >= 7)
    assert 'only_mutate = ["scoring/fingerprint.py"]' in (work / "pyproject.toml").read_text()
    (work / "mutants").mkdir()
    (work / "mutants" / "fingerprint.py.meta").write_text("tested so far")
    again = mutation._scratch_copy(module, tests, tmp_path, resume=True)
    assert again == work and (work / "mutants" / "fingerprint.py.meta").read_text() == "tested so far"
    assert json.loads((work / mutation.COPY_RECORD).read_text()) == record
    fresh = mutation._scratch_copy(module, tests, tmp_path)
    assert fresh == work and not (work / "mutants").exists() and (work / "scoring" / "fingerprint.py").is_file()


def test_status_reads_how_far_a_kept_run_has_got(tmp_path, monkeypatch):
    """--status: per kept copy, its commit and the counts in mutmut's record (mutmut's own names
    for its exit codes: 1 killed, 0 survived, None not checked, -24 timeout)."""
    import json

    import pytest

    pytest.importorskip("mutmut", reason="mutation testing is an extra: pip install -e '.[mutation]'")
    monkeypatch.setattr(mutation, "PROGRESS", tmp_path / "no-progress-kept")
    copy = tmp_path / "scoring_training_trainer"
    (copy / "mutants" / "scoring" / "training").mkdir(parents=True)
    (copy / mutation.COPY_RECORD).write_text(json.dumps({"commit": "abc1234", "copied_at": "2026-11-27T22:35:23Z"}))
    codes = {"a": 1, "b": 1, "c": 0, "d": None, "e": -24, "f": 1}
    (copy / "mutants" / "scoring" / "training" / "trainer.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    assert mutation.status(tmp_path) == [
        "scoring/training/trainer.py (copy of abc1234, 2026-11-27T22:35:23Z): 5 of 6 tested; "
        "3 killed, 1 not checked, 1 survived, 1 timeout"]


def test_a_stopped_run_is_carried_to_a_fresh_machine_while_the_module_is_unchanged(tmp_path, monkeypatch):
    """--resume on a machine without the kept copy: the statuses a stopped sitting saved in
    benchmarks/results/mutation_progress/ are taken over, mutmut is asked for the untested mutants
    only, and the merged statuses are saved again (or, once none is untested, become the result
    and the progress file goes). A changed module starts over: mutmut numbers mutants by place."""
    import json

    module, tests = "scoring/fingerprint.py", ["tests/test_mutation_recheck.py"]
    monkeypatch.setattr(mutation, "PROGRESS", tmp_path / "progress")
    names = [f"scoring.fingerprint.x_key__mutmut_{i}" for i in range(1, 6)]
    record = {n: "not checked" for n in names}  # mutmut's record in the copy, as `mutmut results --all` tells it
    calls = []

    def fake_mutmut(work, *args, check=True):
        if args[0] == "run":
            calls.append(args)
            for name in args[3:] or names:
                record[name] = "survived" if name.endswith("_4") else "killed"
            return ""
        if args[0] == "results":
            return "\n".join(f"    {name}: {status}" for name, status in record.items())
        return f"--- a\n+++ b\n-    old line of {args[1]}\n+    new line\n"

    monkeypatch.setattr(mutation, "_mutmut", fake_mutmut)
    work = mutation._scratch_copy(module, tests, tmp_path / "first-machine")
    first = {names[0]: "killed", names[1]: "timeout", names[2]: "not checked", names[3]: "not checked",
             names[4]: "not checked"}
    sitting = json.loads((work / mutation.COPY_RECORD).read_text()) | {"wall_s": 600.0}
    saved = mutation.save_progress(module, work, first, [sitting])
    assert saved == tmp_path / "progress" / "scoring_fingerprint.json"
    assert json.loads(saved.read_text())["tested"] == 2

    def stop_after_one(work, *args, check=True):  # the sitting is stopped after one more mutant
        if args[0] == "run":
            record[args[3]] = "killed"
            record[names[1]] = "killed"  # what this copy's own record says wins over what was carried
            calls.append(args)
            return ""
        return fake_mutmut(work, *args, check=check)

    monkeypatch.setattr(mutation, "_mutmut", stop_after_one)
    assert mutation.run_module(module, tmp_path / "second-machine", 2, resume=True) is None
    assert calls[-1] == ("run", "--max-children", "2", names[2], names[3], names[4])
    kept = json.loads(saved.read_text())
    assert kept["statuses"] == {names[0]: "killed", names[1]: "killed", names[2]: "killed",
                                names[3]: "not checked", names[4]: "not checked"}
    assert [s["commit"] for s in kept["sittings"]] == [sitting["commit"]] * 2 and kept["tested"] == 3
    assert mutation.status(tmp_path / "none") == [
        f"scoring/fingerprint.py (kept in scoring_fingerprint.json, 2 sitting(s), last of {sitting['commit']}): "
        "3 of 5 tested; 3 killed, 2 not checked"]

    monkeypatch.setattr(mutation, "_mutmut", fake_mutmut)
    for name in names:
        record[name] = "not checked"  # a third machine: a fresh copy again
    result = mutation.run_module(module, tmp_path / "third-machine", 2, resume=True)
    assert calls[-1][3:] == (names[3], names[4])
    assert result["counts"] == {"killed": 4, "survived": 1} and result["mutants"] == 5
    assert [s["mutant"] for s in result["not_killed"]] == [names[3]]
    assert len(result["sittings"]) == 3 and result["sittings"][0]["wall_s"] == 600.0
    assert not saved.exists()

    mutation.save_progress(module, work, first, [sitting])
    (work / module).write_text((work / module).read_text() + "\n# changed\n")
    assert mutation.carried_progress(module, work) is None
    assert mutation.carried_progress(module, mutation._scratch_copy(module, tests, tmp_path / "fourth")) is not None


def test_a_kept_copy_reports_the_tests_it_was_made_with(tmp_path, monkeypatch):
    """MODULES may list more tests by the time a kept copy's run ends: the result and each
    sitting name the tests that copy really ran."""
    module, made_with = "scoring/fingerprint.py", ["tests/test_mutation_recheck.py"]
    assert mutation.MODULES[module] != made_with
    monkeypatch.setattr(mutation, "PROGRESS", tmp_path / "progress")
    names = [f"scoring.fingerprint.x_key__mutmut_{i}" for i in range(1, 3)]
    monkeypatch.setattr(mutation, "_mutmut", lambda work, *args, check=True: "" if args[0] == "run" else (
        "\n".join(f"    {name}: killed" for name in names) if args[0] == "results" else ""))
    work = mutation._scratch_copy(module, made_with, tmp_path / "wd")
    assert mutation.copy_tests(work) == made_with
    result = mutation.run_module(module, tmp_path / "wd", 2, resume=True)
    assert result["tests"] == made_with and [s["tests"] for s in result["sittings"]] == [made_with]
    assert result["counts"] == {"killed": 2}


def test_the_score_after_a_recheck_counts_what_todays_tests_kill_and_drops_what_is_gone():
    result = {"mutants": 10, "counts": {"killed": 6, "survived": 3, "timeout": 1},
              "recheck": {"outcome": {"a": "killed", "b": mutation.GONE, "c": "survived",
                                      "d": "killed (planted by hand, it fails)", "e": mutation.NOT_PLANTED}}}
    assert mutation.rechecked_score(result) == 8 / 9  # a mutant not planted still counts against the score
    assert mutation.rechecked_score({"mutants": 10, "counts": {"killed": 6}}) is None
    assert mutation.rechecked_score({"mutants": 10, "counts": {"killed": 6}, "recheck": {"outcome": {}}}) is None


def test_a_recheck_says_gone_only_where_the_lines_are_nowhere_in_the_module(tmp_path):
    """Lines that are nowhere in today's module are gone (they leave the count); lines still in it,
    but not once in the survivor's own function, are not planted (they stay against the score).
    Neither runs a test."""
    (tmp_path / "mod.py").write_text(SOURCE)
    gone = survivor("x_first", "    rng = make(other)", "    rng = None")
    moved = survivor("xǁPoolǁother", "        rng = make(seed)", "        rng = None")
    outcome = mutation._recheck_some("mod.py", ["no_such_test.py"], [gone, moved], tmp_path, 5)
    assert outcome == {gone["mutant"]: mutation.GONE, moved["mutant"]: mutation.NOT_PLANTED}
    assert (tmp_path / "mod.py").read_text() == SOURCE
