"""`--show`: the canvas in the terminal as it is unmasked, step by step (rich Live).

Masks show as dim `_`, the tokens revealed this step in bold green, tokens edited this
step in bold yellow, the rest as text. The title line shows the cost so far: model calls
(NFE), tokens revealed per call and wall time.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from mlmkit.generation.unmask import StepEvent


class LiveView:
    """A context manager and step callback that redraws every row at each step."""

    def __init__(self, tokenizer, n_rows: int, console: Console | None = None,
                 max_rows: int = 8):
        self.tokenizer = tokenizer
        self.rows: dict[int, Text] = {}
        self.n_rows, self.max_rows = n_rows, max_rows
        self.console = console or Console(stderr=True)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.title = Text("")

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def pieces(self, ids: list[int]) -> list[str]:
        """The text each token adds, from prefix decodes (keeps the tokenizer's spacing)."""
        pieces, previous = [], ""
        for end in range(1, len(ids) + 1):
            current = self.tokenizer.decode(ids[:end])
            if not current.startswith(previous):
                return [" " + self.tokenizer.decode([token]) for token in ids]
            pieces.append(current[len(previous):])
            previous = current
        return pieces

    def render_row(self, ids, masked, revealed, edited=None) -> Text:
        """One canvas row as styled text: masks dim, this step's tokens bold green, edited
        ones bold yellow."""
        text = Text()
        edited = [False] * len(ids) if edited is None else edited.tolist()
        for piece, is_masked, is_new, is_edit in zip(self.pieces(ids.tolist()),
                                                     masked.tolist(), revealed.tolist(),
                                                     edited, strict=True):
            if is_masked:
                text.append(" _", style="dim")
            else:
                text.append(piece, style="bold green" if is_new else
                            "bold yellow" if is_edit else "")
        return text

    def __call__(self, event: StepEvent) -> None:
        for row in range(event.ids.shape[0]):
            index = event.first_row + row
            if index >= self.max_rows:
                continue
            content = event.content[row]
            self.rows[index] = self.render_row(
                event.ids[row][content], event.masked[row][content],
                event.revealed[row][content],
                None if event.edited is None else event.edited[row][content])
        self.title = Text(title(event), style="cyan")
        shown = [self.rows[i] for i in sorted(self.rows)]
        if self.n_rows > self.max_rows:
            shown.append(Text(f"... {self.n_rows - self.max_rows} more rows", style="dim"))
        self.live.update(Group(self.title, *shown), refresh=True)


def title(event: StepEvent) -> str:
    """The live view's status line: progress and the cost so far (calls, tokens per call,
    wall time)."""
    line = (f"step {event.step} · block {event.block} · {int(event.masked.sum())} masks left"
            f" · {event.model_calls} calls")
    if event.model_calls:
        line += f" · {event.filled / event.model_calls:.2f} tokens/call"
    return line + f" · {event.seconds:.2f} s"
