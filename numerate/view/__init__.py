"""`numerate view`: a local, read-only web page over a results database, from the runs to a
leaderboard cell to the cases behind it.

The stack, chosen for what is already installed: Starlette, uvicorn and Jinja2 come with Prefect
(its server is built on them), so the viewer adds no dependency. Pages are rendered on the
server (numerate.view.pages prepares each, numerate.view.svg draws its charts as inline SVG
from numerate.figures.prepare, the templates lay them out), with no JavaScript framework and nothing
fetched from the internet; a page of a running run reloads itself. Every list is paginated.
"""
