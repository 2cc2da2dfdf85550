"""``harness view``: look at runs — judgments next to the humans — in a local, read-only web app, or
as a static site (``--bundle``), and publish runs to the Hub (``harness runs publish``).

* :mod:`harness.view.data` — the one reader of run directories (results.json, samples.parquet);
* :mod:`harness.view.items` — the transcripts, from the dataset the run used;
* :mod:`harness.view.store` / :mod:`harness.view.index` — DuckDB queries over samples.parquet
  (filters, search, sort by disagreement or human spread, pages), never loading a whole run;
* :mod:`harness.view.overview` / :mod:`harness.view.compare` — the overview and compare pages' data;
* :mod:`harness.view.server` — the Starlette app (JSON API + the page, served from ``assets/``);
* :mod:`harness.view.bundle` — the same viewer as static files;
* :mod:`harness.view.publish` — a run as a Hub dataset.

See docs/viewer.md.
"""

from harness.view.bundle import write_bundle
from harness.view.data import read_runs
from harness.view.publish import publish_run
from harness.view.server import Viewer, ViewerServer, create_app

__all__ = ["Viewer", "ViewerServer", "create_app", "publish_run", "read_runs", "write_bundle"]
