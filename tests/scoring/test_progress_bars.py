"""transformers' progress bars stay out of the CLI and training logs: loading a backbone turns
them off for its own time only, and puts back what was there before, so a load inside a longer
quiet block (a training run) does not turn them on in the middle of it."""
import pytest
import torch
from transformers.utils import logging as hf_logging

from scoring.backbones import quiet_progress_bars


@pytest.fixture
def bars_on():
    hf_logging.enable_progress_bar()
    yield
    hf_logging.enable_progress_bar()


def test_a_quiet_block_puts_back_what_was_there(bars_on):
    with quiet_progress_bars():
        assert not hf_logging.is_progress_bar_enabled()
        with quiet_progress_bars():
            assert not hf_logging.is_progress_bar_enabled()
        assert not hf_logging.is_progress_bar_enabled()  # the inner block ended, the outer has not
    assert hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a user who turned them off
    with quiet_progress_bars():
        pass
    assert not hf_logging.is_progress_bar_enabled()
    with pytest.raises(RuntimeError), quiet_progress_bars():
        raise RuntimeError("a load failed")
    assert not hf_logging.is_progress_bar_enabled()


def test_loading_a_backbone_inside_a_quiet_block_keeps_it_quiet(bars_on):
    from scoring.tiny import ensure_tiny_checkpoints, tiny_dir
    from scoring.training.models import load_trainable

    ensure_tiny_checkpoints()
    with quiet_progress_bars():
        load_trainable(str(tiny_dir() / "prmcs-text"), torch.device("cpu"), ("st-text",))
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()
    load_trainable(str(tiny_dir() / "prmcs-text"), torch.device("cpu"), ("st-text",))
    assert hf_logging.is_progress_bar_enabled()
