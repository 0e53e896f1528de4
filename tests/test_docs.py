"""The documentation cannot drift from the code: every `lmlow` command line in the fenced
``sh`` blocks of README.md and docs/*.md is read by the real parser (flags that exist, values
in their ranges), every `lmlow.NAME(...)` call of the ``python`` blocks names the API and keys
it takes, and the README's end-to-end example runs on the bundled corpus."""
import ast
import inspect
import os
import re
import shlex
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def sh_blocks(path: Path) -> list[str]:
    """The fenced ```sh blocks of a Markdown file."""
    return re.findall(r"^```sh\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def commands(block: str) -> list[list[str]]:
    """The `lmlow ...` commands of a shell block (continuation lines joined, comments and
    everything after a `|`, `;`, `&&`, `>` or `&` left out)."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, w in enumerate(words):
            before = words[i - 1] if i else ";"
            if w.endswith("lmlow") and (before in ("&&", "|", "time", "do", "then")
                                        or before.endswith(";")):
                cmd = []
                for x in words[i + 1:]:
                    if x in ("&&", "|", "&", "2>&1") or x.startswith(">") or x == ";":
                        break
                    cmd.append(x.removesuffix(";"))
                    if x.endswith(";"):
                        break
                out.append(cmd)
    return out


EXAMPLES = [(p.relative_to(ROOT), cmd) for p in PAGES for b in sh_blocks(p) for cmd in commands(b)]


def test_the_pages_have_examples():
    assert len(PAGES) >= 10 and len(EXAMPLES) >= 40
    assert {str(p) for p, _ in EXAMPLES} >= {"README.md", "docs/training.md", "docs/data.md"}


@pytest.mark.parametrize("page, argv", EXAMPLES, ids=[f"{p}: {' '.join(c)[:50]}" for p, c in EXAMPLES])
def test_every_documented_command_line_parses(page, argv, capsys):
    """Each documented `lmlow` line is accepted by the parser as it stands (a renamed or
    removed flag, or a value out of its range, fails here)."""
    from lmlow.cli import parse_argv

    if argv[:1] in (["--help"], ["--version"]) or "--help" in argv:
        return
    try:
        parse_argv(argv)
    except SystemExit as e:
        pytest.fail(f"{page}: `lmlow {' '.join(argv)}` does not parse: {capsys.readouterr().err}")


def python_calls() -> list[tuple[Path, ast.Call]]:
    """The ``lmlow.NAME(...)`` calls of the pages' fenced ```python blocks."""
    calls = []
    for page in PAGES:
        for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M):
            calls += [(page.relative_to(ROOT), node) for node in ast.walk(ast.parse(block))
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and isinstance(node.func.value, ast.Name) and node.func.value.id == "lmlow"]
    return calls


def test_every_documented_python_call_takes_what_the_page_gives_it():
    """Each documented ``lmlow.NAME(...)`` is a public name whose signature accepts the call's
    arguments; a key it passes on as settings is a field of its command's settings, and a
    literal value has that field's type (a renamed key or a quoted number fails here)."""
    import lmlow
    from lmlow.config import Config, check_settings
    from lmlow.errors import LmlowError
    from lmlow.glove import GloveConfig
    from lmlow.ngram import NgramOptions
    from lmlow.runs import LSTMRun
    from lmlow.slurm import SlurmOptions

    passed_on = {"fit": Config, "resume": Config, "fit_sweep": Config, "embed": GloveConfig,
                 "fit_ngram": NgramOptions}
    calls = python_calls()
    assert len(calls) >= 15 and {c.func.attr for _, c in calls} >= {"fit", "fit_sweep", "load"}
    for page, call in calls:
        name, where = call.func.attr, f"{page}: lmlow.{call.func.attr}"
        assert name in lmlow.__all__, f"{where}: not in lmlow.__all__"
        signature = inspect.signature(getattr(lmlow, name))
        keys = {k.arg: k.value for k in call.keywords}
        try:
            bound = signature.bind(*call.args, **keys)
        except TypeError as e:
            pytest.fail(f"{where}: {e}")
        if name == "fit_sweep" and "slurm" in keys:     # the SLURM group's keys, as a dict
            node = keys["slurm"]
            given = ({k.arg: k.value for k in node.keywords} if isinstance(node, ast.Call)
                     else {ast.literal_eval(k): v for k, v in zip(node.keys, node.values)})
            try:
                check_settings({k: ast.literal_eval(v) for k, v in given.items()},
                               f"{where}: slurm", SlurmOptions)
            except LmlowError as e:
                pytest.fail(str(e))
        extra = next((v for p, v in bound.arguments.items()
                      if signature.parameters[p].kind == inspect.Parameter.VAR_KEYWORD), {})
        if name == "load":          # the LSTM run's own options
            lstm = inspect.signature(LSTMRun).parameters
            assert set(extra) <= set(lstm), f"{where}: {sorted(set(extra) - set(lstm))}"
            continue
        assert not extra or name in passed_on, f"{where}: takes no settings: {sorted(extra)}"
        cls = passed_on.get(name)
        unknown = sorted(set(extra) - {f.name for f in fields(cls)}) if extra else []
        assert not unknown, f"{where}: unknown settings {unknown}"
        literal = {}
        for key, node in extra.items():
            try:
                literal[key] = ast.literal_eval(node)
            except ValueError:      # a name or an expression: its key is checked above
                pass
        try:
            check_settings(literal, where, cls)
        except LmlowError as e:
            pytest.fail(str(e))


def inline_embeds() -> list[tuple[Path, str]]:
    """The `lmlow embed TEXT...` commands written in the pages' running text (not in blocks)."""
    found = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        found += [(page.relative_to(ROOT), span) for span in
                  re.findall(r"`(lmlow embed \S[^`]*)`", text)]
    return found


def test_every_embed_command_in_the_running_text_parses(capsys):
    """docs/embeddings.md's `lmlow embed corpora/pydocs-mini/pretrain.txt.gz --dim 200
    --epochs 25` lacked the required --out: a reader who copied it got an error."""
    from lmlow.cli import parse_argv

    spans = inline_embeds()
    assert len(spans) >= 2
    for page, span in spans:
        try:
            parse_argv(shlex.split(span)[1:])
        except SystemExit:
            pytest.fail(f"{page}: `{span}` does not parse: {capsys.readouterr().err}")


def test_the_line_reader_finds_commands_and_skips_the_rest():
    block = ("lmlow train C --out R \\\n    --tie no  # a comment\n"
             "make demo\n.venv/bin/lmlow eval R | head\nfor x in a; do lmlow stats C; done\n")
    assert commands(block) == [["train", "C", "--out", "R", "--tie", "no"], ["eval", "R"],
                               ["stats", "C"]]


@pytest.mark.slow
def test_the_readme_example_runs_on_the_bundled_corpus(tmp_path):
    """README's "From raw text to a scored sentence", as written, from a folder holding the
    bundled corpus: every command succeeds and the last prints a scored sentence."""
    block = next(b for b in sh_blocks(ROOT / "README.md") if "corpora/pydocs-mini" in b)
    (tmp_path / "corpora").symlink_to(ROOT / "corpora")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    import json
    scored = json.loads(last)
    # the last: a typed sentence read with --raw as the bundled corpus was prepared (spaCy,
    # PTB: lowercase, numbers as N, no punctuation), which --prepared-like recorded
    assert scored["words"] == ["the", "function", "returns", "a", "list", "of", "N", "strings",
                               "<eos>"]
    assert len(scored["logprob"]) == 9 and all(p < 0 for p in scored["logprob"])
    assert not any(scored["oov"]), scored
    predicted = [line for line in r.stdout.splitlines()
                 if line.startswith("the function returns -> ")]
    assert len(predicted) == 1 and predicted[0].count(", ") == 4, r.stdout[-2000:]
    completions = [line for line in r.stdout.splitlines()
                   if line.startswith("the function ret* -> ")]
    assert len(completions) == 1 and all(
        item.startswith("ret") for item in completions[0].split(" -> ")[1].split(", "))
    nbest = json.loads(next(line for line in r.stdout.splitlines() if '"id": "hyp1-1"' in line))
    assert nbest["words"] == ["the", "function", "returns", "a", "list", "<eos>"]
    totals = next(line for line in r.stdout.splitlines() if line.startswith("hyp1-1\t"))
    assert totals.split("\t") == ["hyp1-1", str(nbest["total_logprob"]),
                                   str(nbest["total_log10prob"]), "6", str(sum(nbest["oov"]))]
    assert "wrote runs/ex/lm.pt2: " in r.stdout and (tmp_path / "runs/ex/lm.pt2").is_file()


def test_every_relative_link_of_the_pages_exists():
    missing = [(str(p.relative_to(ROOT)), link) for p in PAGES
               for link in re.findall(r"\]\(([^)#\s]+)", p.read_text())
               if not link.startswith("http") and not (p.parent / link).exists()]
    assert not missing, missing
