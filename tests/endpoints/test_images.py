"""What an Images API's or a vision model's answer may make numerate do: the image urls it
fetches, the counts it reads."""

import pytest

from numerate.endpoints.images import image_url_problem, read_count

BASE = "https://api.example.com/v1"


@pytest.mark.parametrize(
    ("url", "base", "refused"),
    [
        ("https://cdn.example.net/a.png", BASE, None),
        ("https://93.184.216.34/a.png", BASE, None),  # a public address
        ("http://127.0.0.1:8000/v1/files/a.png", "http://127.0.0.1:8000/v1", None),  # its own
        ("file:///etc/passwd", BASE, "scheme 'file'"),
        ("ftp://cdn.example.net/a.png", BASE, "scheme 'ftp'"),
        ("http://cdn.example.net/a.png", BASE, "plain http image url from an https endpoint"),
        ("https://169.254.169.254/latest/meta-data", BASE, "local or private address"),
        ("https://127.0.0.1/a.png", BASE, "local or private address"),
        ("https://localhost/a.png", BASE, "local or private address"),
        ("https://10.1.2.3/a.png", BASE, "local or private address"),
        ("https://[::1]/a.png", BASE, "local or private address"),
        ("https://[fd00::1]/a.png", BASE, "local or private address"),
        ("http://10.0.0.5/a.png", "http://10.0.0.9/v1", "local or private address"),
    ],
)  # fmt: skip
def test_an_image_url_is_fetched_only_where_it_may_lead(url, base, refused):
    problem = image_url_problem(url, base)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem


@pytest.mark.parametrize(
    ("answer", "count"),
    [
        ("I count them.\nAnswer: 7", 7),
        ("There are seven apples.\nAnswer: seven", 7),
        ("Answer: 0", 0),
        ("Answer: 21", 21),
        ("So many, I lost count.", None),
        ("Answer: 99999999999999999999", None),  # reads as infinity: no count
        ("Answer: 2.5", None),
        ("Answer: -3", None),
        ("Answer: 3 or 4", None),
    ],
)
def test_a_counters_answer_is_a_whole_number_from_0_or_unparsed(answer, count):
    assert read_count(answer) == count
