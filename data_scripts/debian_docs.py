#!/usr/bin/env python3
"""Turn Debian documentation packages into plain text: one file per HTML page, one paragraph a line.

Used for two corpora: the Python 3.11 documentation (``python3.11-doc``, whose pages are under
``usr/share/doc/python3.11/html``) and an in-domain pretraining text made of the Sphinx docs of
the Python libraries Debian ships (``LIBRARY_DOC_PACKAGES``). Each package is fetched with
``apt-get download`` and unpacked with ``dpkg -x`` (no root needed, nothing is installed), so
it runs on any Debian-like machine that has apt's package lists. Only prose is kept: code
blocks, navigation, sidebars, tables of contents and tables are dropped. Idempotent: a package
already unpacked is not fetched again and a page whose text is newer than its HTML is not
parsed again. Needs only the standard library and lxml.
"""
from __future__ import annotations

import argparse
import fnmatch
import gzip
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import lxml.etree
import lxml.html

# Debian bookworm packages with the (mostly Sphinx) docs of Python libraries. Library docs are
# API-heavy, so it takes about 70 of them, the largest in prose found, to pass 10M words of
# prose: 10.7M words (str.split) in 26.5k pages, about 9.2M once repeated paragraphs (inherited
# docstrings, aliased API pages) are counted once. Not python3.11-doc: the target corpus.
LIBRARY_DOC_PACKAGES = [
    # science and data
    "python-pandas-doc", "python-statsmodels-doc", "python-scipy-doc", "python-astropy-doc",
    "python-sklearn-doc", "python-sympy-doc", "python-skimage-doc", "python-dask-doc",
    "python-distributed-doc", "python-xarray-doc", "numba-doc", "python-tables-doc",
    "python-h5py-doc", "python-mpmath-doc", "python-nibabel-doc", "python-nipy-doc",
    "python-nipype-doc", "python-mdanalysis-doc", "python-pymatgen-doc", "python-ase-doc",
    "python-qutip-doc", "python-brian-doc", "python-astroquery-doc", "python-fluids-doc",
    "python-silx-doc", "python-skbio-doc", "python-biopython-doc", "python-escript-doc",
    "python-sfepy-doc", "python-pyfai-doc", "python-pil-doc",
    # web, databases, networking
    "python-sqlalchemy-doc", "python-django-doc", "python-djangorestframework-doc",
    "twisted-doc", "python-celery-doc", "python-kombu-doc", "python-tornado-doc",
    "python-gevent-doc", "python-scrapy-doc", "python-flask-doc", "python-werkzeug-doc",
    "python-jinja2-doc", "python-aiohttp-doc", "python-cryptography-doc", "python-pymongo-doc",
    "python-peewee-doc", "python-openstacksdk-doc", "python-openstackclient-doc",
    "python-slixmpp-doc", "python3-aioxmpp-doc", "python-discord-doc",
    "python3-python-telegram-bot-doc", "python-taurus-doc",
    # developer tools and file formats
    "python-pytest-doc", "python-hypothesis-doc", "python-ipython-doc", "python-ipyparallel-doc",
    "python-pyparsing-doc", "python-pygments-doc", "python-setuptools-doc", "sphinx-doc",
    "docutils-doc", "python-lxml-doc", "cython-doc", "pylint-doc", "xonsh-doc",
    "python-ezdxf-doc", "python-pygame-doc", "python-fonttools-doc",
]

# What is not a prose page, as fnmatch patterns: one without "/" matches any directory or file
# name on the way, one with "/" the whole path relative to the root. Source listings, indexes
# and search pages (Sphinx), pydoctor's index pages (Twisted's API docs), and setuptools' copy
# of CPython's distutils docs (part of python3.11-doc, the target corpus: it would leak it).
DEFAULT_SKIP = ("_modules", "_sources", "_static", "_images", "_downloads",
                "genindex*", "*modindex*", "search.html", "searchindex*",
                "nameIndex.html", "classIndex.html", "moduleIndex.html", "undoccedSummary.html",
                "all-documents.html", "*deprecated/distutils/*")

HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz")

# Where the main text is, most specific first; the first that matches wins.
MAIN_XPATHS = (
    "//*[@role='main'][not(.//*[@role='main'])]",  # Sphinx themes; the innermost one
    "//div[contains(concat(' ', normalize-space(@class), ' '), ' body ')]",
    "//main", "//article",
    # Sphinx themes without a marked main (Django's): the parent of the outermost sections.
    "(//section | //div[contains(concat(' ', normalize-space(@class), ' '), ' section ')])"
    "[not(ancestor::section or ancestor::div[contains(concat(' ', normalize-space(@class), ' '),"
    " ' section ')])][1]/..",
    "//body",
)


def _has_class(*names: str) -> str:
    """XPath test: the element has one of these classes (XPath 1.0 has no class selector)."""
    return " or ".join(f"contains(concat(' ', normalize-space(@class), ' '), ' {n} ')"
                       for n in names)


# Elements inside the main text that are not prose: dropped with their content (not their tail).
DROP_XPATH = " | ".join("." + x for x in [
    "//script", "//style", "//noscript", "//template", "//nav", "//footer", "//address", "//form",
    "//button", "//select", "//svg", "//pre", "//table", "//dt", "//math",
    "//header[not(.//h1 or .//h2 or .//h3)]",
    "//*[@role='navigation' or @role='search' or @role='banner' or @role='contentinfo']",
    "//*[starts-with(@class, 'highlight') or contains(@class, ' highlight')]",  # code blocks
    "//div[" + _has_class("math") + "]",  # display math (LaTeX source)
    "//*[" + _has_class(
        "headerlink", "doctest", "linenos", "lineno", "toctree-wrapper", "contents",
        "sphinxsidebar", "related", "nav", "prev-next-area", "rst-footer-buttons",
        "bd-sidebar-primary", "bd-sidebar-secondary", "bd-header-article", "copybtn",
        "viewcode-link", "sphx-glr-footer", "sphx-glr-download", "sphx-glr-download-link-note",
        "sphx-glr-timing", "sphx-glr-signature", "sphx-glr-script-out", "sphx-glr-thumbnails",
        "sphx-glr-thumbcontainer",
        "navbar", "sidemenu", "menu", "banner", "deck",  # DRF's navbar, lxml's menu, Celery
        "functionHeader", "extrasDocstring",  # pydoctor's signatures
    ) + "]",
    "//*[@id='search-results-container' or @id='current-docs-container']",  # pydoctor's search help
])

# Elements that start and end a paragraph; any other element (a, code, em, span...) is inline.
BLOCK_TAGS = frozenset("""p li dd dt h1 h2 h3 h4 h5 h6 blockquote div section article aside main
    body ul ol dl table tr td th thead tbody caption pre figure figcaption header footer nav
    form details summary hr address center fieldset""".split())

MIN_WORDS = 3


def _warn(msg: str) -> None:
    print(f"debian_docs.py: warning: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- download

def _find_deb(pkg: str, deb_dir: Path) -> Path | None:
    """The newest ``PKG_*.deb`` already in deb_dir (apt names them PKG_VERSION_ARCH.deb)."""
    debs = sorted(deb_dir.glob(f"{pkg}_*.deb"), key=lambda p: p.stat().st_mtime)
    return debs[-1] if debs else None


def _fetch_deb(pkg: str, deb_dir: Path) -> Path | None:
    """The package's .deb, downloaded unless cached; None (with a warning) on failure."""
    deb = _find_deb(pkg, deb_dir)
    if deb is not None:
        return deb
    try:
        r = subprocess.run(["apt-get", "download", pkg], cwd=deb_dir, capture_output=True,
                           text=True)
    except FileNotFoundError:
        _warn(f"{pkg}: apt-get not found (this needs a Debian-like system); skipped")
        return None
    deb = _find_deb(pkg, deb_dir)
    if r.returncode != 0 or deb is None:
        lines = r.stderr.splitlines()
        errors = [ln for ln in lines if ln.startswith("E:")] or lines
        _warn(f"{pkg}: apt-get download failed ({errors[-1] if errors else r.returncode}); skipped")
        return None
    return deb


def download(packages, cache_dir) -> dict[str, Path]:
    """Fetch and unpack each package into ``cache_dir/root/PKG``; return {pkg: that folder}.

    A package already unpacked is kept as is. One that cannot be fetched or unpacked is warned
    about on stderr and left out of the result, so a long list survives a renamed package.
    """
    cache_dir = Path(cache_dir)
    deb_dir = cache_dir / "debs"
    deb_dir.mkdir(parents=True, exist_ok=True)
    roots: dict[str, Path] = {}
    for pkg in packages:
        root = cache_dir / "root" / pkg
        if not root.is_dir():
            deb = _fetch_deb(pkg, deb_dir)
            if deb is None or not _unpack(deb, root):
                continue
        roots[pkg] = root
    return roots


def _unpack(deb: Path, root: Path) -> bool:
    """``dpkg -x`` into a scratch folder renamed at the end: no half-unpacked root is ever kept."""
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["dpkg", "-x", str(deb), str(partial)], capture_output=True, text=True)
    except FileNotFoundError:
        _warn(f"{deb.name}: dpkg not found; skipped")
        return False
    if r.returncode != 0:
        _warn(f"{deb.name}: dpkg -x failed: {r.stderr.strip().splitlines()[-1:]}; skipped")
        shutil.rmtree(partial, ignore_errors=True)
        return False
    partial.rename(root)
    return True


# --------------------------------------------------------------------------- one page

def _parse(html_bytes: bytes):
    """Parse as UTF-8 when the bytes are UTF-8 (pages without a charset would else be Latin-1)."""
    try:
        html_bytes.decode("utf-8")
        parser = lxml.html.HTMLParser(encoding="utf-8")
    except UnicodeDecodeError:
        parser = None
    try:
        return lxml.html.document_fromstring(html_bytes, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return None


def _is_not_prose(doc) -> bool:
    """A stub left where a page moved ("The page has been moved to this page"), or a Doxygen
    page (the C++ API of python-escript-doc: signatures and source listings)."""
    return bool(doc.xpath("//meta[translate(@http-equiv, 'REFSH', 'refsh')='refresh'] | "
                          "//meta[@name='generator'][starts-with(@content, 'Doxygen')]"))


def _main_element(doc):
    for xpath in MAIN_XPATHS:
        found = doc.xpath(xpath)
        if found:
            return found[0]
    return doc


def _drop_non_prose(main) -> None:
    """Remove code, navigation, tables of contents etc., keeping the text that follows each."""
    for el in main.xpath(DROP_XPATH):
        if el is not main and el.getparent() is not None:
            el.drop_tree()


def _paragraphs(el, out: list[str], buf: list[str]) -> None:
    """Collect inline text into buf; at every block boundary, flush buf as one paragraph.

    So a <li> or <dd> holding nested lists or paragraphs gives its own text and then theirs.
    """
    if not isinstance(el.tag, str):  # comment or processing instruction
        return
    block = el.tag.lower() in BLOCK_TAGS
    if block:
        _flush(buf, out)
    elif el.tag.lower() == "br":
        buf.append(" ")
    if el.text:
        buf.append(el.text)
    for child in el:
        _paragraphs(child, out, buf)
        if child.tail:
            buf.append(child.tail)
    if block:
        _flush(buf, out)


def _flush(buf: list[str], out: list[str]) -> None:
    words = "".join(buf).replace("¶", " ").split()
    buf.clear()
    if len(words) >= MIN_WORDS:
        out.append(" ".join(words))


def extract_page(html_bytes: bytes) -> list[str]:
    """The main text of a (Sphinx) HTML page as paragraphs, each one line of collapsed whitespace.

    The main element is found by MAIN_XPATHS and cleaned of DROP_XPATH (code, navigation, tables,
    <dt> signatures, headerlinks); what is left is split into paragraphs wherever a block (p, li,
    dd, heading, div...) starts or ends, so inline markup such as <code> stays in its sentence.
    Runs of fewer than MIN_WORDS words (admonition titles, rubrics) are left out.
    """
    doc = _parse(html_bytes)
    if doc is None or _is_not_prose(doc):
        return []
    main = _main_element(doc)
    _drop_non_prose(main)
    out: list[str] = []
    buf: list[str] = []
    _paragraphs(main, out, buf)
    _flush(buf, out)
    return out


# --------------------------------------------------------------------------- a tree of pages

def _is_html(name: str) -> bool:
    return name.lower().endswith(HTML_SUFFIXES)


def _txt_name(name: str) -> str:
    stem = name[:-3] if name.lower().endswith(".gz") else name
    return stem.rsplit(".", 1)[0] + ".txt"


def _skipped(rel: Path, skip) -> bool:
    """Whether a path relative to the root matches a skip pattern (see DEFAULT_SKIP)."""
    path = rel.as_posix()
    return any(fnmatch.fnmatch(path, pattern) if "/" in pattern
               else any(fnmatch.fnmatch(part, pattern) for part in rel.parts)
               for pattern in skip)


def html_pages(root, skip=DEFAULT_SKIP):
    """Relative paths of the HTML pages under root, sorted; symlinks are not followed.

    Symlinks in an unpacked package point to other packages (shared JavaScript) or to the host's
    own /usr, or duplicate a folder of the same package: none of them is a page of its own.
    """
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if not _skipped(here / d, skip))
        for name in sorted(filenames):
            if _is_html(name) and not _skipped(here / name, skip) \
                    and not (root / here / name).is_symlink():
                yield here / name


def _read_html(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.lower().endswith(".gz") else data


def _page_text(src: Path, dst: Path, force: bool) -> list[str]:
    """The page's paragraphs, taken from dst when it is newer than src (idempotent re-runs)."""
    if not force and dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return dst.read_text(encoding="utf-8").splitlines()
    paragraphs = extract_page(_read_html(src))
    if paragraphs:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        tmp.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
        tmp.replace(dst)
    elif dst.exists():
        dst.unlink()
    return paragraphs


def extract_tree(root, out_dir, *, skip=DEFAULT_SKIP, force=False) -> tuple[int, int, int]:
    """Write each page under root as ``out_dir/<its path>.txt``; return (pages, paragraphs, words).

    Pages with no paragraph get no file and are not counted; of two pages with one name (pandas
    ships whatsnew/index.html and index.html.gz) the first in sorted order is taken. Deterministic
    (sorted walk); .txt files left in out_dir by an earlier run that no page gives now are removed.
    """
    root, out_dir = Path(root), Path(out_dir)
    pages = paragraphs = words = 0
    seen, written = set(), set()
    for rel in html_pages(root, skip):
        dst = out_dir / rel.parent / _txt_name(rel.name)
        if dst in seen:
            continue
        seen.add(dst)
        lines = _page_text(root / rel, dst, force)
        if lines:
            written.add(dst)
            pages += 1
            paragraphs += len(lines)
            words += sum(len(line.split()) for line in lines)
    _remove_stale(out_dir, written)
    return pages, paragraphs, words


def _remove_stale(out_dir: Path, keep: set) -> None:
    for path in out_dir.rglob("*.txt"):
        if path not in keep:
            path.unlink()
    for folder in sorted(out_dir.rglob("*"), reverse=True):  # deepest first
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


# --------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: %(prog)s python3.11-doc --cache cache/debdocs --out raw/python311 "
               "--html-subdir usr/share/doc/python3.11/html. Exits 1 when no package could be "
               "fetched.")
    ap.add_argument("packages", nargs="*", metavar="PKG",
                    help="Debian package names (e.g. python3.11-doc python-django-doc)")
    ap.add_argument("--library-docs", action="store_true",
                    help=f"also process LIBRARY_DOC_PACKAGES, the {len(LIBRARY_DOC_PACKAGES)} "
                         "Python library doc packages of the pretraining corpus")
    ap.add_argument("--cache", type=Path, required=True,
                    help="cache folder: .deb files go to CACHE/debs, unpacked packages to "
                         "CACHE/root/PKG")
    ap.add_argument("--out", type=Path, required=True,
                    help="output folder: each package's pages are written as OUT/PKG/<path>.txt")
    ap.add_argument("--html-subdir", default="", metavar="PATH",
                    help="folder inside each unpacked package to take pages from, e.g. "
                         "usr/share/doc/python3.11/html (default: the whole package); output paths "
                         "are relative to it; a package without it is warned about and skipped")
    ap.add_argument("--force", action="store_true",
                    help="parse every page again even when its .txt is newer than its HTML "
                         "(needed after a change to the extraction code)")
    args = ap.parse_args(argv)
    packages = args.packages + (LIBRARY_DOC_PACKAGES if args.library_docs else [])
    packages = list(dict.fromkeys(packages))  # without repeats, in order
    if not packages:
        ap.error("no package given (name some PKG or use --library-docs)")

    totals = [0, 0, 0]
    start = time.time()
    roots = download(packages, args.cache)
    for pkg, root in roots.items():
        src = root / args.html_subdir
        if not src.is_dir():
            _warn(f"{pkg}: no folder {args.html_subdir} in the package; skipped")
            continue
        t0 = time.time()
        counts = extract_tree(src, args.out / pkg, force=args.force)
        totals = [t + c for t, c in zip(totals, counts)]
        print(f"{pkg}: {counts[0]} pages, {counts[1]} paragraphs, {counts[2]} words "
              f"({time.time() - t0:.0f}s)", flush=True)
    print(f"total: {totals[0]} pages, {totals[1]} paragraphs, {totals[2]} words "
          f"({time.time() - start:.0f}s)")
    return 0 if roots else 1


if __name__ == "__main__":
    sys.exit(main())
