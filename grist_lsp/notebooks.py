"""Jupyter notebooks as programs: the script of a notebook's code cells, and the way back to cells.

A notebook is checked as the program "Run All" executes: its code cells, in order, as one
script (`Notebook.script`). Everything past this module works on that script as on a `.py`
file's text (the static pass, the engine, fixes, caches); positions are the script's lines.
This module turns them back into a cell and a line in it (`Notebook.locate`), into the line of
the `.ipynb` file a code-scanning viewer shows (`Notebook.file_position`), and turns edits of
the script into a new `.ipynb` text where only the edited cells' `source` changed
(`Notebook.apply`).

Cells are numbered as the editor shows them: "cell 3" is the notebook's third cell, markdown
cells counted. Two things a kernel runs are not Python and are left out, said once in
`Notebook.magics`: IPython magics and shell lines (`%matplotlib inline`, `!pip install x`,
`files = !ls`, `obj?`), each replaced by `pass` so the lines keep their numbers, and whole cells
in another language (`%%bash`, `%%writefile`). A cell that is not valid Python is left out too
(its lines blank) and named in `Notebook.bad_cells`: the other cells are still checked.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from grist_lsp.analyzer.parsing import UNPARSABLE, parse
from grist_lsp.model import Span, TextEdit, Verdict, file_error

SUFFIX = ".ipynb"
# The kind of a left-out cell's error verdict: that cell is left out, the others still run.
CELL_ERROR = "cell"
_JSON = json.JSONDecoder()


def _string_at(raw: str, quote: int) -> tuple[str, int]:
    """(decoded string, offset past its closing quote) of the JSON string opening at ``quote``."""
    return _JSON.raw_decode(raw, quote)


# Cell magics whose body is Python the kernel runs (timed, captured, profiled): the first line
# is left out, the body checked. Any other cell magic makes the cell another language.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# A line IPython rewrites before Python sees it: a magic, a shell escape, help, or an
# assignment from one (`files = !ls`, `t = %timeit -o f()`).
_MAGIC_LINE = re.compile(r"\s*(?:[%!?]|[\w.]+\s*=\s*[%!])|[^#]*\?\??\s*$")


class NotebookError(ValueError):
    """A file that is not a notebook: invalid JSON, or JSON without a list of cells. ``str()``
    names the file; ``problem`` is what is wrong, for a caller that names it its own way."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.problem = problem


def is_notebook(path: str | Path) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass(frozen=True)
class BadCell:
    """A code cell the check leaves out: it is not Python, or only a kernel runs it."""

    number: int  # the cell as the editor numbers it (1-based, markdown cells counted)
    line: int  # 1-based, in the cell
    message: str
    col: int = 0  # 0-based


@dataclass(frozen=True)
class CodeCell:
    """One code cell: where its lines sit in the script, and its source as the file holds it."""

    index: int  # 0-based position in the notebook's "cells" list
    first_line: int  # 1-based line of the script where the cell's first line is
    source: str
    lines: int  # lines the cell takes in the script

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def last_line(self) -> int:
        return self.first_line + self.lines - 1


@dataclass
class Notebook:
    """A notebook read for checking: its code cells and the script they make."""

    path: str
    raw: str  # the .ipynb text as read
    cells: list[CodeCell]
    script: str
    magics: list[str] = field(default_factory=list)  # the magics and shell commands left out, each once
    bad_cells: list[BadCell] = field(default_factory=list)
    # Script lines left out (magics, shell lines, bad cells): no edit may touch them.
    left_out: frozenset[int] = frozenset()
    _sources: list[_SourceValue] | None = field(default=None, repr=False)

    # --- script line -> cell ---------------------------------------------------

    @functools.cached_property
    def _starts(self) -> list[int]:
        return [c.first_line for c in self.cells]  # cells are complete once ``notebook_of`` returns

    def cell_at(self, line: int) -> CodeCell | None:
        """The code cell holding script line ``line`` (None past the last cell)."""
        at = bisect.bisect_right(self._starts, line) - 1
        if at < 0 or line > self.cells[at].last_line:
            return None
        return self.cells[at]

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, 1-based line in the cell) of script line ``line``."""
        cell = self.cell_at(line)
        if cell is None:  # past the end: the last cell's last line
            cell = self.cells[-1] if self.cells else CodeCell(0, 1, "", 1)
            return cell.number, max(1, cell.lines)
        return cell.number, line - cell.first_line + 1

    def cell_span(self, span: Span) -> tuple[int, Span]:
        """(cell number, ``span`` in that cell's lines); an end past the cell is clipped to it."""
        cell = self.cell_at(span.start_line)
        if cell is None:  # past the end: where ``locate`` puts it
            number, line = self.locate(span.start_line)
            return number, Span(line, span.start_col, max(line, span.end_line), span.end_col)
        end_line, end_col = span.end_line, span.end_col
        if end_line > cell.last_line:
            end_line, end_col = cell.last_line, len(_lines(cell.source)[-1]) if cell.source else 0
        shift = cell.first_line - 1
        return cell.number, Span(span.start_line - shift, span.start_col, end_line - shift, end_col)

    def file_position(self, line: int, col: int) -> tuple[int, int]:
        """(1-based line, 1-based column) in the ``.ipynb`` text of script position (line, col):
        where the cell's source string holding it is, as a viewer of the file shows it."""
        cell = self.cell_at(line)
        if cell is None:
            return 1, 1
        value = self._source_values()[cell.index]
        lines = _lines(cell.source)
        wanted = sum(len(text) for text in lines[: line - cell.first_line]) + col
        seen = 0
        start, prefix = value.start, ""
        for start, text in value.items:  # the string holding character ``wanted`` of the source
            if wanted < seen + len(text) or (start, text) == value.items[-1]:
                prefix = text[: max(0, wanted - seen)]
                break
            seen += len(text)
        offset = start + len(json.dumps(prefix, ensure_ascii=False)) - 1
        row = self.raw.count("\n", 0, offset)
        return row + 1, offset - (self.raw.rfind("\n", 0, offset) + 1) + 1

    def cell_errors(self) -> list[Verdict]:
        """One ``error`` verdict per cell left out (not Python, or only a kernel runs it), at it."""
        first = {cell.number: cell.first_line for cell in self.cells}
        return [
            file_error(
                self.path,
                f"cell {bad.number}: {bad.message}",
                first[bad.number] + bad.line - 1,
                bad.col,
                kind=CELL_ERROR,
            )
            for bad in self.bad_cells
        ]

    def in_cells(self, words: str) -> str:
        """``words`` with the script's lines said as cells: "at line 12" and "nb.ipynb:12" (what the
        engine writes of the script it ran) become "at cell 3:2" and "nb.ipynb:cell 3:2"."""

        def cell(match: re.Match[str]) -> str:
            number, line = self.locate(int(match["line"]))
            return f"{match['head'] or match['file']}cell {number}:{line}"

        name = re.escape(Path(self.path).name)
        return re.sub(rf"(?:(?P<head>\bat )line |(?P<file>{name}:))(?P<line>\d+)\b", cell, words)

    # --- script edits -> .ipynb ------------------------------------------------

    def apply(self, edits: list[TextEdit]) -> str | None:
        """The ``.ipynb`` text with script ``edits`` made in the cells' sources, every byte outside
        the edited cells' ``source`` values unchanged; None when an edit is not within one cell
        or touches a line that was left out (a magic): such a fix cannot be written back."""
        per_cell: dict[int, list[TextEdit]] = {}
        for edit in edits:
            placed = self._cell_edit(edit)
            if placed is None:
                return None
            per_cell.setdefault(placed[0].index, []).append(placed[1])
        from grist_lsp.edits import EditError, apply_edits

        replaced: list[tuple[int, int, str]] = []
        values = self._source_values()
        for cell in self.cells:
            if cell.index not in per_cell:
                continue
            ends_open = not cell.source.endswith("\n")
            try:
                new = apply_edits(cell.source + ("\n" if ends_open else ""), per_cell[cell.index])
            except EditError:
                return None
            if ends_open and new.endswith("\n"):
                new = new[:-1]
            replaced.append(values[cell.index].rewritten(self.raw, cell.source, new))
        out, cursor = [], 0
        for start, end, text in sorted(replaced):
            out += [self.raw[cursor:start], text]
            cursor = end
        return "".join(out) + self.raw[cursor:]

    def edit_cell(self, span: Span) -> CodeCell | None:
        """The cell an edit of ``span`` (script positions) stays within, touching no line that was
        left out (a magic); None when there is none: such an edit cannot be made in a cell."""
        cell = self.cell_at(span.start_line)
        if cell is None:
            return None
        # An end at column 0 of the next cell's first line is the end of this cell's text.
        end_ok = span.end_line <= cell.last_line or (
            span.end_line == cell.last_line + 1 and span.end_col == 0
        )
        touched = range(span.start_line, span.end_line + (1 if span.end_col else 0))
        if not end_ok or any(line in self.left_out for line in touched):
            return None
        return cell

    def _cell_edit(self, edit: TextEdit) -> tuple[CodeCell, TextEdit] | None:
        span = edit.span
        cell = self.edit_cell(span)
        if cell is None:
            return None
        shift = cell.first_line - 1
        local = Span(span.start_line - shift, span.start_col, span.end_line - shift, span.end_col)
        return cell, TextEdit(local, edit.new_text)

    def _source_values(self) -> list[_SourceValue]:
        if self._sources is None:
            self._sources = _locate_sources(self.raw)
        return self._sources


def program_text(path: str | Path) -> str:
    """The Python a program file holds: a ``.py`` file's text, a notebook's script. Raises
    OSError / UnicodeDecodeError / NotebookError for a file that cannot be read as one."""
    with open(path, encoding="utf-8", newline="") as handle:
        text = handle.read()
    return read_notebook(str(path), text).script if is_notebook(path) else text


def cell_of(path: str | Path, line: int) -> tuple[int, int] | None:
    """(cell number, line in the cell) of script line ``line`` of the notebook at ``path`` (read
    from disk); None for a ``.py`` file or a notebook that cannot be read."""
    if not is_notebook(path):
        return None
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return read_notebook(str(path), handle.read()).locate(line)
    except (OSError, UnicodeDecodeError, NotebookError):
        return None


def read_notebook(path: str, raw: str) -> Notebook:
    """The notebook in ``raw`` (the ``.ipynb`` text); raises NotebookError when it is not one."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            path,
            f"not a valid notebook: invalid JSON at line {exc.lineno} column {exc.colno} "
            f"({exc.msg}); open it in Jupyter or fix the file",
        ) from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise NotebookError(path, 'not a notebook: no "cells" list (nbformat 4); save it again with Jupyter')
    sources = [
        _joined(cell.get("source", ""))
        if isinstance(cell, dict) and cell.get("cell_type") == "code"
        else None
        for cell in cells
    ]
    return notebook_of(path, sources, raw)


def notebook_of(path: str, sources: list[str | None], raw: str = "") -> Notebook:
    """The notebook whose cells, in order, hold ``sources`` (None for a markdown or raw cell):
    from a file (``raw`` its text) or from an editor's cells (no file text: nothing to rewrite)."""
    notebook = Notebook(path=path, raw=raw, cells=[], script="")
    script: list[str] = []
    left_out: set[int] = set()
    magics: list[str] = []
    for index, source in enumerate(sources):
        if source is None:
            continue
        first = len(script) + 1
        lines, dropped, note = _python_lines(index + 1, source, notebook.bad_cells)
        magics.extend(note)
        left_out.update(first + i for i in dropped)
        script.extend(lines)
        notebook.cells.append(CodeCell(index, first, source, len(lines)))
    notebook.script = "".join(script)
    notebook.left_out = frozenset(left_out)
    notebook.magics = list(dict.fromkeys(magics))
    return notebook


def magics_note(left_out: dict[str, list[str]]) -> str | None:
    """The one line saying which magics and shell lines were left out (notebook -> its magics): by
    file for one or two notebooks, counted for more (a folder of tutorials all say %matplotlib)."""
    shown = {name: magics for name, magics in left_out.items() if magics}
    if not shown:
        return None
    every = ", ".join(dict.fromkeys(m for magics in shown.values() for m in magics))
    if len(shown) > 2:
        return f"IPython magics and shell lines left out of the check in {len(shown)} notebooks ({every})"
    return "; ".join(
        f"{name}: IPython magics and shell lines left out of the check ({', '.join(magics)})"
        for name, magics in shown.items()
    )


def _python_lines(number: int, source: str, bad: list[BadCell]) -> tuple[list[str], list[int], list[str]]:
    """The cell's lines as the script holds them (each ending in a newline), the 0-based lines
    left out, and the magics named (for the note)."""
    lines = [line if line.endswith("\n") else line + "\n" for line in _lines(source)]
    if not lines:
        return [], [], []
    first = lines[0].strip()
    if first.startswith("%%"):
        magic = first[2:].split()[0] if first[2:].split() else ""
        if magic not in _PYTHON_CELL_MAGICS:
            bad.append(BadCell(number, 1, f"a %%{magic} cell is not Python; left out"))
            return ["\n"] * len(lines), list(range(len(lines))), []
        lines[0] = "pass\n"
        dropped, named = [0], [f"%%{magic}"]
    else:
        dropped, named = [], []
    if _parses(lines):
        return lines, dropped, named
    for i, line in enumerate(lines):
        if i not in dropped and _MAGIC_LINE.match(line) and not line.lstrip().startswith("#"):
            indent = line[: len(line) - len(line.lstrip())]
            named.append(_magic_name(line.strip()))
            lines[i] = f"{indent}pass\n"
            dropped.append(i)
    error = _syntax_error(lines)
    if error is None:
        return lines, dropped, named
    line_no, col, message = error
    bad.append(BadCell(number, line_no, f"{message}; this cell is left out, the others are checked", col))
    return ["\n"] * len(lines), list(range(len(lines))), []


def _magic_name(line: str) -> str:
    word = re.sub(r"^[\w.]+\s*=\s*", "", line).split()[0] if line.split() else line
    return word if word.startswith(("%", "!")) else "help (?)"


def _parses(lines: list[str]) -> bool:
    return _syntax_error(lines) is None


def _syntax_error(lines: list[str]) -> tuple[int, int, str] | None:
    """(1-based line, 0-based column, words) of the first syntax error, or of an ``await`` outside
    any ``async def`` (a kernel runs it; a script does not compile); None when it parses."""
    try:
        tree = parse("".join(lines))
    except SyntaxError as exc:
        return exc.lineno or 1, max(0, (exc.offset or 1) - 1), f"syntax error: {exc.msg}"
    except UNPARSABLE as exc:
        return 1, 0, f"cannot be parsed ({type(exc).__name__})"
    awaited = _top_level_await(tree)
    if awaited is not None:
        return awaited.lineno, awaited.col_offset, "top-level await runs only in a Jupyter kernel"
    return None


def _top_level_await(tree: ast.Module) -> ast.expr | ast.stmt | None:
    """The first ``await`` / ``async for`` / ``async with`` not inside an ``async def``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            return node
        if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef, ast.Lambda)):
            continue  # an await there is the function's (or a syntax error Python reports itself)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return None


def _joined(source: object) -> str:
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _lines(text: str) -> list[str]:
    """``text`` split after each newline, as nbformat splits a source into its list (only at
    "\\n": ``str.splitlines`` also splits at form feeds and U+2028, which Python does not)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


# --- where each cell's "source" is in the .ipynb text ----------------------------


@dataclass(frozen=True)
class _SourceValue:
    """A cell's ``"source"`` value in the raw text: its span, and each string in it."""

    start: int
    end: int
    items: list[tuple[int, str]]  # (offset of the opening quote, decoded string), in order
    is_list: bool  # a list of lines (nbformat), or one string

    def rewritten(self, raw: str, old: str, new: str) -> tuple[int, int, str]:
        """(start, end, text) replacing this value with ``new``'s lines in the file's own layout;
        a line that did not change keeps its original spelling (escapes included)."""
        if not self.is_list:
            return self.start, self.end, json.dumps(new, ensure_ascii=False)
        old_lines, new_lines = _lines(old), _lines(new)
        spelled: dict[int, str] = {}
        if [text for _, text in self.items] == old_lines:  # one string per line, as nbformat writes
            matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
            for tag, i1, _, j1, j2 in matcher.get_opcodes():
                for k in range(j2 - j1 if tag == "equal" else 0):
                    quote = self.items[i1 + k][0]
                    spelled[j1 + k] = raw[quote : _string_at(raw, quote)[1]]
        if not new_lines:
            return self.start, self.end, "[]"
        before, after = self._layout(raw)
        tokens = [spelled.get(j, json.dumps(line, ensure_ascii=False)) for j, line in enumerate(new_lines)]
        return self.start, self.end, "[" + before + ("," + before).join(tokens) + after + "]"

    def _layout(self, raw: str) -> tuple[str, str]:
        """The whitespace before each item and before the closing bracket (nbformat: a newline
        and the key's indent + 1, then a newline and the key's indent)."""
        if self.items:
            last = self.items[-1][0]
            return raw[self.start + 1 : self.items[0][0]], raw[_string_at(raw, last)[1] : self.end - 1]
        line_start = raw.rfind("\n", 0, self.start) + 1
        head = raw[line_start : self.start]
        indent = " " * (len(head) - len(head.lstrip()))
        return "\n" + indent + " ", "\n" + indent


def _locate_sources(raw: str) -> list[_SourceValue]:
    """Every cell's ``"source"`` value, by the cell's index (a cell without one: an empty span)."""
    scanner = _Scanner(raw)
    return scanner.sources()


class _Scanner:
    """Just enough of a JSON reader to find ``cells[i]["source"]`` with offsets: the values are
    read by ``json`` already; this walks the same text and remembers where each source is."""

    _SPACE = re.compile(r"[ \t\n\r]*")
    _SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.at = 0
        self.found: dict[int, _SourceValue] = {}

    def sources(self) -> list[_SourceValue]:
        self._value(())
        count = max(self.found, default=-1) + 1
        return [self.found.get(i, _SourceValue(0, 0, [], True)) for i in range(count)]

    def _skip(self) -> None:
        space = self._SPACE.match(self.raw, self.at)
        self.at = space.end() if space else self.at

    def _value(self, path: tuple[str | int, ...]) -> None:
        self._skip()
        start, ch = self.at, self.raw[self.at]
        if ch == "{":
            self._object(path)
        elif ch == "[":
            items = self._array(path)
            if len(path) == 3 and path[0] == "cells" and path[2] == "source":
                self._found(path, _SourceValue(start, self.at, items, True))
        elif ch == '"':
            text, self.at = _string_at(self.raw, self.at)
            if len(path) == 3 and path[0] == "cells" and path[2] == "source":
                self._found(path, _SourceValue(start, self.at, [(start, text)], False))
        else:
            match = self._SCALAR.match(self.raw, self.at)
            if match is None:
                raise NotebookError("<notebook>", f"unexpected {ch!r} at offset {self.at}")
            self.at = match.end()

    def _found(self, path: tuple[str | int, ...], value: _SourceValue) -> None:
        if isinstance(path[1], int):
            self.found[path[1]] = value

    def _object(self, path: tuple[str | int, ...]) -> None:
        self.at += 1
        self._skip()
        if self.raw[self.at] == "}":
            self.at += 1
            return
        while True:
            self._skip()
            key, self.at = _string_at(self.raw, self.at)
            self._skip()
            self.at += 1  # ':'
            self._value((*path, key) if len(path) < 3 else path)
            self._skip()
            closing = self.raw[self.at]
            self.at += 1
            if closing == "}":
                return

    def _array(self, path: tuple[str | int, ...]) -> list[tuple[int, str]]:
        self.at += 1
        self._skip()
        items: list[tuple[int, str]] = []
        if self.raw[self.at] == "]":
            self.at += 1
            return items
        for position in range(1 << 62):
            self._skip()
            if self.raw[self.at] == '"':
                start = self.at
                text, self.at = _string_at(self.raw, self.at)
                items.append((start, text))
            else:
                self._value((*path, position) if len(path) < 3 else path)
            self._skip()
            closing = self.raw[self.at]
            self.at += 1
            if closing == "]":
                break
        return items
