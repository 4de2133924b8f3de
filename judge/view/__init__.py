"""`judge view`: the run history as a static web page (charts of each metric across runs,
the runs table, any two runs' per-question differences), written into a folder that opens
from file:// with nothing fetched: `build_view(records, out)`."""

from judge.view.site import build_view

__all__ = ["build_view"]
