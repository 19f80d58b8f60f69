"""The three seed ranges never overlap, and reports refuse ranges that trained or chose."""
import pytest

from scoring.world.sets import split_scenes
from scoring.world.splits import OUTSIDE_FIRST_SEED, SPLITS, check_report_range, split_range


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


@pytest.mark.parametrize("first,count", [(0, 10), (499_990, 20), (999_999, 2), (500_000, 1)])
def test_report_refuses_train_or_validation(first, count):
    with pytest.raises(ValueError, match="overlap the (train|validation) range"):
        check_report_range(first, count)


def test_report_accepts_test_and_outside_ranges():
    assert check_report_range(1_000_000, 300) == "test"
    assert check_report_range(1_499_700, 300) == "test"
    assert check_report_range(OUTSIDE_FIRST_SEED, 300) == "outside"
    with pytest.raises(ValueError, match="straddle"):
        check_report_range(1_499_900, 300)
