"""Naming runs and sweeps on the command line (numerate.results.runs)."""

import pytest

from numerate.kernel.errors import ConfigError
from numerate.results.runs import check_known_sweep, check_sweep_name, resolve_run
from numerate.store import Store
from numerate.store.reader import Reader


def test_a_run_id_that_begins_another_names_itself_and_a_shorter_prefix_is_ambiguous(db_path):
    store = Store.open(db_path)
    for run_id in ("abc", "abcd", "abce"):
        store.start_run(run_id, "s", "h", {}, "v")
    Store.close_all()
    with Reader.open(db_path) as reader:
        assert resolve_run(reader, "abc") == "abc"
        assert resolve_run(reader, " abcd\n") == "abcd"  # as pasted
        with pytest.raises(ConfigError, match="run 'ab' is ambiguous: it starts abc"):
            resolve_run(reader, "ab")


@pytest.mark.parametrize("blank", ["", "  ", "\t"])
def test_a_blank_sweep_name_is_refused(blank):
    """A blank --sweep would mean every sweep (a mutation sweep: only '' was checked)."""
    with pytest.raises(ConfigError, match="give a sweep name, or leave it out"):
        check_sweep_name(blank)


def test_a_sweep_of_a_database_without_runs_is_said_so(db_path):
    Store.open(db_path)
    Store.close_all()
    with Reader.open(db_path) as reader:
        with pytest.raises(ConfigError, match=r"no run of that sweep \(it holds no sweep's run\)"):
            check_known_sweep(reader, "nightly")
        check_known_sweep(reader, None)
