"""The training progress bar: step, loss, tokens/s and ETA (rich), or nothing."""

from __future__ import annotations


class TrainProgress:
    """A rich progress bar over the budget's share (0 to 1000 ‰)."""

    def __init__(self, enabled: bool, description: str = "pretraining", console=None):
        self.enabled = enabled
        self._progress = None
        self._description = description
        self._console = console

    def __enter__(self) -> TrainProgress:
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("step {task.fields[step]} · loss {task.fields[loss]} · "
                           "{task.fields[rate]} tokens/s"),
                TimeRemainingColumn(), console=self._console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=1000, step=0,
                                                 loss="-", rate="-")
        return self

    def update(self, share: float, step: int, loss: float | None = None,
               rate: float | None = None) -> None:
        if self._progress is None:
            return
        fields = {"step": step}
        if loss is not None:
            fields["loss"] = f"{loss:.3f}"
        if rate is not None:
            fields["rate"] = f"{rate:,.0f}"
        self._progress.update(self._task, completed=int(share * 1000), **fields)

    def print(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
