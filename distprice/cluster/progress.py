"""The progress bar of a stage of a job on a cluster: the scheduler streams how many of the stage's tasks
(and of the tasks they wait on) are done, and :class:`distprice.progress.Bar` draws it on the terminal. The
bar holds task keys, not futures, so results are released as soon as the job hands them on."""

from __future__ import annotations

from distributed.diagnostics.progressbar import ProgressBar

from ..progress import Bar

STARTING = " (the engines compile on a worker's first job)"
"""Said after the label while no task of the stage is done yet."""


class _StageBar(ProgressBar):
    def __init__(self, keys, client, label: str, bar: Bar):
        self.label, self.bar = label, bar
        super().__init__(keys, client.scheduler.address, interval="200ms", complete=True)
        self.client = lambda: client  # the scheduler connection's TLS arguments come from the client

    def _draw_bar(self, remaining, all, **kwargs):
        self.bar.total = all
        done = all - remaining
        self.bar.update(done, self.label if done else self.label + STARTING)

    def _draw_stop(self, **kwargs):
        self.bar.close()


def follow(client, futures, label: str) -> None:
    """Draws a bar of ``futures`` (a stage of a job) on the terminal while they run; nothing when stderr is
    not a terminal."""
    bar = Bar(len(futures), label)
    if bar.shown and futures:
        client.loop.add_callback(_StageBar([f.key for f in futures], client, label, bar).listen)
