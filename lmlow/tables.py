"""Plain-text tables (Markdown) and CSV, for terminals, READMEs and spreadsheets alike."""
from __future__ import annotations

import csv
import io


def fmt(x, digits: int = 3) -> str:
    """Numbers to ``digits`` significant figures (as the papers print them), others as text;
    a missing value (a KenLM row's parameter count, one seed's sd) is an empty cell, not "None"."""
    if x is None:
        return ""
    if isinstance(x, float):
        if x != x:
            return "nan"
        # 999.96 at 3 digits rounds up to 1000, which "g" writes as 1e+03: whole then
        return f"{x:.{digits}g}" if abs(float(f"{x:.{digits}g}")) < 10 ** digits else f"{x:.0f}"
    return str(x)


def markdown(headers: list[str], rows: list[list], digits: int = 3) -> str:
    """A Markdown table; a ``|`` in a cell (a baseline named by its folder) or a header
    (``KL(unigram || mean p)``) is escaped, so it stays one cell."""
    headers = [str(h).replace("|", "\\|") for h in headers]
    cells = [[fmt(c, digits).replace("|", "\\|") for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    def line(values):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in cells)])


def to_csv(headers: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()
