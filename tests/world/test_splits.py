"""The three seed ranges never overlap, and reports refuse ranges that trained or chose."""
import pytest

from scoring.world.sets import split_scenes
from scoring.world.splits import OUTSIDE_FIRST_SEED, SPLITS, check_range, check_report_range, split_range


def test_ranges_are_disjoint_and_ordered():
    ranges = sorted(SPLITS.values(), key=lambda r: r.first)
    assert [r.name for r in ranges] == ["train", "validation", "test"]
    for a, b in zip(ranges, ranges[1:]):
        assert a.stop <= b.first
        assert not a.overlaps(b.first, b.stop - b.first)
    assert all(OUTSIDE_FIRST_SEED >= r.stop for r in ranges)


def test_split_scenes_draw_from_their_range():
    assert [s.seed for s in split_scenes("validation", 3)] == [500_000, 500_001, 500_002]
    assert split_scenes("heldout", 1)[0].seed == split_scenes("test", 1)[0].seed == 1_000_000
    with pytest.raises(ValueError, match="unknown split"):
        split_range("dev")


def test_split_scenes_skip_passes_over_the_first_scenes():
    assert [s.seed for s in split_scenes("train", 2, skip=3000)] == [3000, 3001]
    assert split_scenes("train", 2, skip=1)[0].seed == split_scenes("train", 2)[1].seed
    with pytest.raises(ValueError, match="holds 500000 scenes, not 499999 \\+ 2"):
        split_scenes("validation", 2, skip=499_999)
    with pytest.raises(ValueError, match="negative"):
        split_scenes("train", 1, skip=-1)


@pytest.mark.parametrize("first,count,named", [(0, 10, "train"), (499_990, 20, "train"), (999_999, 2, "validation"),
                                               (500_000, 1, "validation")])
def test_report_refuses_train_or_validation(first, count, named):
    with pytest.raises(ValueError, match=f"overlap the {named} range"):
        check_report_range(first, count)


def test_report_accepts_test_and_outside_ranges():
    assert check_report_range(1_000_000, 300) == "test"
    assert check_report_range(1_499_700, 300) == "test"
    assert check_report_range(OUTSIDE_FIRST_SEED, 300) == "outside"
    with pytest.raises(ValueError, match="straddle"):
        check_report_range(1_499_900, 300)


def test_choosing_runs_inside_validation_only():
    assert check_range(500_100, 60, choose=True) == "validation (for choosing, not a result)"
    assert check_range(999_940, 60, choose=True).startswith("validation")
    for first, count in [(499_999, 2), (999_990, 20), (1_000_000, 10), (0, 5), (500_000, 0)]:
        with pytest.raises(ValueError, match="validation range"):
            check_range(first, count, choose=True)
    assert check_range(1_000_000, 300) == "test"  # without choose: the report rules
    with pytest.raises(ValueError, match="overlap the validation range"):
        check_range(500_100, 60)


def test_negative_seeds_are_refused_since_they_are_the_training_scenes_again():
    """random.Random(-s) is random.Random(s): scenes -300..-1 are training scenes 1..300, which a
    range check on the number line called "outside" (an audit)."""
    from scoring.world.scene import generate_scene

    with pytest.raises(ValueError, match="seeds are 0 or more"):
        check_report_range(-300, 300)
    with pytest.raises(ValueError, match="seeds are 0 or more"):
        check_range(-2_000_000, 10)
    with pytest.raises(ValueError, match="seed -s gives the same scene as s"):
        generate_scene(-1234)
    assert generate_scene(0).seed == 0
