"""A package's names that load on first use: the value is the submodule's own, kept in the
package afterwards; any other name is an AttributeError, so `from package import submodule`
still imports the submodule."""
import subprocess
import sys


def test_a_name_loads_its_module_on_first_use_and_others_are_attribute_errors():
    probe = """
import sys
import scoring.training as training
assert 'scoring.training.trainer' not in sys.modules and 'torch' not in sys.modules
assert not hasattr(training, 'no_such_name')
train = training.train
import scoring.training.trainer as trainer
assert train is trainer.train and vars(training)['train'] is train
from scoring.training import losses  # a submodule, not a name of the map
assert losses is sys.modules['scoring.training.losses']
from scoring.corpus import ENGINES, score_corpus
from scoring.corpus.run import score_corpus as defined
assert score_corpus is defined and ENGINES == ('auto', 'local', 'ray')
print('ok')
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
