"""What produced a stored number: the code version of a run, the generator version of a case."""


def test_code_version_marks_uncommitted_changes(monkeypatch):
    import numerate.config.provenance as provenance

    answers = {"rev-parse": "abc1234", "status": " M numerate/planning/plan.py"}
    monkeypatch.setattr(provenance, "_git", lambda *args: answers[args[0]])
    provenance.code_version.cache_clear()
    try:
        assert provenance.code_version().endswith("+abc1234.dirty")
        answers["status"] = ""
        provenance.code_version.cache_clear()
        assert provenance.code_version().endswith("+abc1234")
    finally:
        provenance.code_version.cache_clear()


def test_generator_version_follows_the_generator_sources(tmp_path, monkeypatch):
    import numerate.config.provenance as provenance

    source = tmp_path / "objects.py"
    source.write_text("WORDS = ['glove']\n")
    monkeypatch.setattr(provenance, "generator_sources", lambda manifold: [source])
    provenance.generator_version.cache_clear()
    try:
        before = provenance.generator_version("objects")
        source.write_text("WORDS = ['sock']\n")  # a word moved between categories
        provenance.generator_version.cache_clear()
        assert provenance.generator_version("objects") != before
    finally:
        provenance.generator_version.cache_clear()


def test_the_real_generator_sources_are_the_module_and_common():
    from numerate.config.provenance import generator_sources

    names = {p.name for p in generator_sources("shuffle")}
    assert names == {"shuffle.py", "common.py"}
