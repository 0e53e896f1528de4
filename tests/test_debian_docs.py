"""data_scripts/debian_docs.py: a Sphinx page's prose is kept, its code and navigation are not."""
import gzip
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("lxml")

SCRIPT = Path(__file__).resolve().parents[1] / "data_scripts" / "debian_docs.py"
_spec = importlib.util.spec_from_file_location("debian_docs", SCRIPT)
debian_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(debian_docs)

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>shlex — Simple lexical analysis</title>
<script>var navigation = "script text is not prose at all";</script>
<style>body { font-family: sans-serif serif monospace; }</style></head>
<body>
<div class="related" role="navigation"><ul>
<li><a href="index.html">Python Standard Library index page</a></li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="module-shlex">
<h1>shlex — Simple lexical analysis<a class="headerlink" href="#module-shlex">¶</a></h1>
<p>The <code class="docutils literal"><span class="pre">shlex</span></code> class makes it easy
   to write lexical analyzers.</p>
<div class="toctree-wrapper compound"><ul>
<li><a href="a.html">Table of contents entry one</a></li></ul></div>
<div class="highlight-python3 notranslate"><div class="highlight">
<pre>import shlex; shlex.split("a b c d")</pre></div></div>
<div class="doctest highlight-default"><div class="highlight">
<pre>&gt;&gt;&gt; print(shlex.join(["x", "y z"]))</pre></div></div>
<dl class="py function">
<dt class="sig sig-object py" id="shlex.split">shlex.split(s, comments=False, posix=True)
<a class="headerlink" href="#shlex.split">¶</a></dt>
<dd><p>Split the string <em>s</em> using shell-like syntax.</p>
<div class="admonition note"><p class="admonition-title">Note</p>
<p>Passing <code>None</code> for <em>s</em> is deprecated.</p></div></dd></dl>
<ul><li>A plain list item with enough words.</li>
<li><p>An item with its own paragraph.</p><ul><li>And a nested item inside it.</li></ul></li></ul>
<p>Too short.</p>
</section>
</div></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents sidebar heading</h3>
<p>Sidebar text that must not be kept.</p></div>
<div class="footer">Copyright 2001-2023, Python Software Foundation and others.</div>
</div></body></html>
"""


@pytest.fixture(scope="module")
def paragraphs():
    return debian_docs.extract_page(PAGE.encode("utf-8"))


def test_main_text_kept_one_paragraph_per_line(paragraphs):
    assert paragraphs == [
        "shlex — Simple lexical analysis",
        "The shlex class makes it easy to write lexical analyzers.",
        "Split the string s using shell-like syntax.",
        "Passing None for s is deprecated.",
        "A plain list item with enough words.",
        "An item with its own paragraph.",
        "And a nested item inside it.",
    ]


def test_navigation_code_and_headerlinks_dropped(paragraphs):
    text = "\n".join(paragraphs)
    for noise in ("¶", "index page", "Table of contents", "Sidebar", "Copyright", "import shlex",
                  ">>>", "comments=False", "script text", "font-family", "Too short"):
        assert noise not in text


def test_inline_code_stays_in_its_sentence(paragraphs):
    assert "The shlex class makes it easy to write lexical analyzers." in paragraphs


def test_page_without_sphinx_markup_falls_back_to_body():
    html = b"<html><body><h2>Old style page title here</h2>Some loose text<br>on two lines.</body>"
    assert debian_docs.extract_page(html) == ["Old style page title here",
                                              "Some loose text on two lines."]


def test_empty_or_broken_input_gives_no_paragraph():
    assert debian_docs.extract_page(b"") == []
    assert debian_docs.extract_page(b"\x00\xff\xfe") == []


def test_extract_tree_skips_non_pages_and_is_idempotent(tmp_path):
    root, out = tmp_path / "html", tmp_path / "out"
    (root / "library").mkdir(parents=True)
    (root / "_sources").mkdir()
    (root / "deprecated" / "distutils").mkdir(parents=True)
    (root / "library" / "shlex.html").write_text(PAGE, encoding="utf-8")
    (root / "whatsnew.html.gz").write_bytes(gzip.compress(PAGE.encode("utf-8")))
    (root / "library" / "shlex.html.gz").write_bytes(gzip.compress(b"<p>Same page, once more.</p>"))
    for skipped in ("genindex.html", "py-modindex.html", "search.html", "_sources/shlex.html",
                    "deprecated/distutils/apiref.html"):
        (root / skipped).write_text(PAGE, encoding="utf-8")
    (root / "same-page.html").symlink_to(root / "library" / "shlex.html")  # not a page of its own
    first = debian_docs.extract_tree(root, out)
    assert first == (2, 14, 2 * 47)  # shlex.html.gz is a second copy of shlex.html: left out
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "library", "library/shlex.txt", "whatsnew.txt"]  # no empty folder for skipped pages
    assert (out / "library" / "shlex.txt").read_text(encoding="utf-8").splitlines()[1] == \
        "The shlex class makes it easy to write lexical analyzers."
    assert debian_docs.extract_tree(root, out) == first
    assert debian_docs.extract_tree(root, out, force=True) == first
    (root / "whatsnew.html.gz").unlink()
    assert debian_docs.extract_tree(root, out) == (1, 7, 47)
    assert not (out / "whatsnew.txt").exists()
    for page in (root / "library").iterdir():
        page.unlink()
    assert debian_docs.extract_tree(root, out) == (0, 0, 0)
    assert list(out.rglob("*")) == []  # stale texts and their folders are gone


def test_redirect_stub_gives_no_paragraph():
    html = (b'<html><head><meta http-equiv="refresh" content="0;URL=new.html"/></head>'
            b'<body><p>The page has been moved to <a href="new.html">this page</a></p></body>')
    assert debian_docs.extract_page(html) == []


def test_download_keeps_unpacked_packages_and_warns_on_missing_ones(tmp_path, capsys):
    (tmp_path / "root" / "already-unpacked-doc").mkdir(parents=True)
    roots = debian_docs.download(["already-unpacked-doc", "no-such-package-lmlow-doc"], tmp_path)
    assert roots == {"already-unpacked-doc": tmp_path / "root" / "already-unpacked-doc"}
    assert "no-such-package-lmlow-doc" in capsys.readouterr().err
