"""`judge view`: the run history as a static web page (charts of each metric across runs,
the runs table, any two runs' per-question differences), written into a folder that opens
from file:// with nothing fetched: `build_view(records, out)`; and a monitor state's
windows, baseline and alerts with their worst traces: `build_monitor_view(state, out)`."""

from judge.view.site import build_monitor_view, build_view

__all__ = ["build_monitor_view", "build_view"]
