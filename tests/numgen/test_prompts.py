import json
from collections import Counter

import pytest
from pydantic import ValidationError

from numerate.numgen.prompts import (
    OBJECTS,
    PromptSpec,
    iter_prompts,
    make_prompts,
    prompt_chunks,
)


def test_every_number_is_equally_represented_and_objects_are_dealt_evenly():
    prompts = make_prompts(PromptSpec(per_number=22))
    assert Counter(p.target for p in prompts) == {n: 22 for n in range(1, 11)}
    for n in range(1, 11):
        per_object = Counter(p.object for p in prompts if p.target == n)
        assert set(per_object) == set(OBJECTS) and set(per_object.values()) == {2}
    assert [p.target for p in prompts[:10]] == list(range(1, 11))  # interleaved


def test_text_is_singular_for_one_and_plural_otherwise():
    prompts = make_prompts(PromptSpec(per_number=1, objects=["human faces"], n_max=3))
    assert [p.text for p in prompts] == [
        "An image with 1 human face",
        "An image with 2 human faces",
        "An image with 3 human faces",
    ]


def test_the_same_seed_gives_the_same_prompts_and_seeds():
    a, b = make_prompts(PromptSpec(seed=5)), make_prompts(PromptSpec(seed=5))
    assert a == b
    assert a != make_prompts(PromptSpec(seed=6))
    assert len({p.image_seed for p in a}) == len(a)  # one image seed per prompt
    assert len({p.prompt_id for p in a}) == len(a)


def test_custom_objects_need_a_singular():
    with pytest.raises(
        ValidationError,
        match=r"'bananas' is none of the objects numerate knows .*prompts.singulars",
    ):
        PromptSpec(objects=["bananas"])
    spec = PromptSpec(objects=["bananas"], singulars={"bananas": "banana"}, per_number=1)
    assert make_prompts(spec)[0].text == "An image with 1 banana"
    spec = PromptSpec(objects=["Äpfel"], singulars={"Äpfel": "Apfel"}, per_number=1)
    assert make_prompts(spec)[0].text == "An image with 1 Apfel"  # any language's words


@pytest.mark.parametrize(
    ("values", "field"),
    [({"n_min": 0}, "n_min"), ({"n_max": 20}, "n_max"), ({"per_number": 0}, "per_number"),
     ({"n_min": 5, "n_max": 3}, "n_min = 5"), ({"objects": []}, "objects is empty"),
     # corpus H: stored and prompted as given
     ({"objects": ["ca\nts"], "singulars": {"ca\nts": "cat"}}, "a name with a control"),
     ({"objects": ["bananas"], "singulars": {"bananas": "ban\tana"}}, "ban.tana'. a name with"),
     ({"objects": [" cats"], "singulars": {" cats": "cat"}}, "spaces around it"),
     # a hostile pass: a bidi override (it turns the table's line around) was taken, which
     # sweep and model names refuse
     ({"objects": ["zeb\u202eras"], "singulars": {"zeb\u202eras": "zebra"}}, "a bidi control"),
     ({"objects": ["zebras"], "singulars": {"zebras": "zeb\u2028ra"}}, "a bidi control")],
)  # fmt: skip
def test_bad_specs_name_the_field(values, field):
    with pytest.raises(ValidationError, match=field):
        PromptSpec(**values)


def format_prompts(prompts, fmt):
    return "".join(prompt_chunks(prompts, fmt))


def test_exports():
    prompts = make_prompts(PromptSpec(per_number=2))
    assert json.loads(format_prompts(prompts, "json"))[0]["text"] == prompts[0].text
    lines = format_prompts(prompts, "jsonl").splitlines()
    assert [json.loads(line)["prompt_id"] for line in lines] == [p.prompt_id for p in prompts]
    assert format_prompts(prompts, "txt").splitlines() == [p.text for p in prompts]
    with pytest.raises(ValueError, match="'pkl'"):
        format_prompts(prompts, "pkl")


def test_the_json_export_is_the_array_json_writes():
    prompts = make_prompts(PromptSpec(per_number=3))
    expected = json.dumps([p.model_dump() for p in prompts], indent=2) + "\n"
    assert format_prompts(prompts, "json") == expected
    assert format_prompts([], "json") == json.dumps([]) + "\n"


def test_an_export_holds_one_prompt_at_a_time():
    """A hostile pass: `numgen prompts --count 100000` (a million prompts) held them all,
    1.6 GB; 10,000 already 201 MB."""
    import tracemalloc

    spec = PromptSpec(per_number=5000)  # 50,000 prompts: about 60 MB held as a list
    tracemalloc.start()
    try:
        written = sum(len(chunk) for chunk in prompt_chunks(iter_prompts(spec), "jsonl"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written > 5_000_000 and peak < 5_000_000, peak
