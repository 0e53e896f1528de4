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

# Debian bookworm packages with the Sphinx docs of Python libraries, chosen for size and prose
# (user guides and tutorials rather than bare API listings). About 13M words together.
LIBRARY_DOC_PACKAGES = [
    "python-pandas-doc", "python-statsmodels-doc", "python-scipy-doc", "python-astropy-doc",
    "python-sklearn-doc", "python-sympy-doc", "python-skimage-doc", "python-dask-doc",
    "python-distributed-doc", "python-xarray-doc", "python-sqlalchemy-doc", "python-django-doc",
    "python-djangorestframework-doc", "twisted-doc", "numba-doc", "python-celery-doc",
    "python-kombu-doc", "python-tables-doc", "python-pytest-doc", "python-hypothesis-doc",
    "python-tornado-doc", "python-gevent-doc", "python-lxml-doc", "python-scrapy-doc",
    "python-ipython-doc", "python-ipyparallel-doc", "python-mpmath-doc", "python-pyparsing-doc",
    "python-cryptography-doc", "python-flask-doc", "python-werkzeug-doc", "python-jinja2-doc",
    "python-pygments-doc", "python-setuptools-doc", "python-aiohttp-doc", "python-h5py-doc",
    "sphinx-doc", "python-biopython-doc",
]

# Path components (directory or file names, fnmatch patterns) that are not prose pages.
DEFAULT_SKIP = ("_modules", "_sources", "_static", "_images", "_downloads",
                "genindex*", "*modindex*", "search.html", "searchindex*")

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
    return " or ".join(f"contains(concat(' ', normalize-space(@class), ' '), ' {n} ')" for n in names)


# Elements inside the main text that are not prose: dropped with their content (not their tail).
DROP_XPATH = " | ".join("." + x for x in [
    "//script", "//style", "//noscript", "//template", "//nav", "//footer", "//form", "//button",
    "//select", "//svg", "//pre", "//table", "//dt", "//math",
    "//header[not(.//h1 or .//h2 or .//h3)]",
    "//*[@role='navigation' or @role='search' or @role='banner' or @role='contentinfo']",
    "//*[starts-with(@class, 'highlight') or contains(@class, ' highlight')]",  # code blocks
    "//div[" + _has_class("math") + "]",  # display math (LaTeX source)
    "//*[" + _has_class(
        "headerlink", "doctest", "linenos", "lineno", "toctree-wrapper", "contents",
        "sphinxsidebar", "related", "nav", "prev-next-area", "rst-footer-buttons",
        "bd-sidebar-primary", "bd-sidebar-secondary", "bd-header-article", "copybtn",
        "viewcode-link", "sphx-glr-footer", "sphx-glr-download", "sphx-glr-timing",
        "sphx-glr-script-out", "sphx-glr-thumbnails", "sphx-glr-thumbcontainer",
    ) + "]",
])

# Elements that end a paragraph. Text is emitted only for runs whose nearest block is one of
# PROSE_BLOCKS (so the text of e.g. <dt> signatures or <caption> never becomes a paragraph).
BLOCK_TAGS = frozenset("""p li dd dt h1 h2 h3 h4 h5 h6 blockquote div section article aside main
    body ul ol dl table tr td th thead tbody caption pre figure figcaption header footer nav
    form details summary hr address center fieldset""".split())
PROSE_BLOCKS = frozenset("""p li dd h1 h2 h3 h4 h5 h6 blockquote div section article aside main
    body figcaption details summary""".split())

MIN_WORDS = 3


def _warn(msg: str) -> None:
    print(f"debian_docs.py: warning: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- download

def _find_deb(pkg: str, deb_dir: Path) -> Path | None:
    """The newest ``PKG_*.deb`` already in deb_dir (apt names them PKG_VERSION_ARCH.deb)."""
    debs = sorted(deb_dir.glob(f"{pkg}_*.deb"), key=lambda p: p.stat().st_mtime)
    return debs[-1] if debs else None


def _fetch_deb(pkg: str, deb_dir: Path) -> Path | None:
    """The package's .deb, downloaded with apt-get unless cached; None (and a warning) on failure."""
    deb = _find_deb(pkg, deb_dir)
    if deb is not None:
        return deb
    try:
        r = subprocess.run(["apt-get", "download", pkg], cwd=deb_dir, capture_output=True, text=True)
    except FileNotFoundError:
        _warn(f"{pkg}: apt-get not found (this needs a Debian-like system); skipped")
        return None
    deb = _find_deb(pkg, deb_dir)
    if r.returncode != 0 or deb is None:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("E:")] or r.stderr.splitlines()
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
    """``dpkg -x`` into a scratch folder renamed at the end, so a half-unpacked root never exists."""
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


def _paragraphs(el, out: list[str], buf: list[str], prose: bool) -> None:
    """Collect inline text into buf; at every block boundary, flush buf as one paragraph."""
    if not isinstance(el.tag, str):  # comment or processing instruction
        return
    tag = el.tag.lower()
    if tag in BLOCK_TAGS:
        _flush(buf, out, prose)
        prose = tag in PROSE_BLOCKS
    elif tag == "br":
        buf.append(" ")
    if el.text:
        buf.append(el.text)
    for child in el:
        _paragraphs(child, out, buf, prose)
        if child.tail:
            buf.append(child.tail)
    if tag in BLOCK_TAGS:
        _flush(buf, out, prose)


def _flush(buf: list[str], out: list[str], prose: bool) -> None:
    text = " ".join("".join(buf).replace("¶", " ").split())
    buf.clear()
    if prose and len(text.split()) >= MIN_WORDS:
        out.append(text)


def extract_page(html_bytes: bytes) -> list[str]:
    """The main text of a (Sphinx) HTML page as paragraphs, each one line of collapsed whitespace.

    Paragraphs are the text runs of prose blocks (p, li, dd, headings, blockquote, ...), split
    wherever a nested block starts or ends; inline markup such as <code> stays in the sentence.
    Runs of fewer than MIN_WORDS words (admonition titles, rubrics) are left out.
    """
    doc = _parse(html_bytes)
    if doc is None:
        return []
    main = _main_element(doc)
    _drop_non_prose(main)
    out: list[str] = []
    buf: list[str] = []
    _paragraphs(main, out, buf, True)
    _flush(buf, out, True)
    return out


# --------------------------------------------------------------------------- a tree of pages

def _is_html(name: str) -> bool:
    return name.lower().endswith(HTML_SUFFIXES)


def _txt_name(name: str) -> str:
    stem = name[:-3] if name.lower().endswith(".gz") else name
    return stem.rsplit(".", 1)[0] + ".txt"


def _skipped(name: str, skip) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in skip)


def html_pages(root, skip=DEFAULT_SKIP):
    """Relative paths of the HTML pages under root, sorted; symlinks are not followed.

    Symlinks in an unpacked package point to other packages (shared JavaScript) or to the host's
    own /usr, or duplicate a folder of the same package: none of them is a page of its own.
    """
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not _skipped(d, skip))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if _is_html(name) and not _skipped(name, skip) and not path.is_symlink():
                yield path.relative_to(root)


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
    """Write every page under root as ``out_dir/<relative path>.txt``; return (pages, paragraphs, words).

    Pages with no paragraph get no file and are not counted. Deterministic (sorted walk).
    """
    root, out_dir = Path(root), Path(out_dir)
    pages = paragraphs = words = 0
    for rel in html_pages(root, skip):
        dst = out_dir / rel.parent / _txt_name(rel.name)
        lines = _page_text(root / rel, dst, force)
        if lines:
            pages += 1
            paragraphs += len(lines)
            words += sum(len(line.split()) for line in lines)
    return pages, paragraphs, words


# --------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: %(prog)s python3.11-doc --cache /work/cache/debdocs "
               "--out /work/cache/raw/python311 --html-subdir usr/share/doc/python3.11/html")
    ap.add_argument("packages", nargs="*", metavar="PKG",
                    help="Debian package names (e.g. python3.11-doc python-django-doc)")
    ap.add_argument("--library-docs", action="store_true",
                    help=f"also process LIBRARY_DOC_PACKAGES, the {len(LIBRARY_DOC_PACKAGES)} "
                         "Python library doc packages of the pretraining corpus")
    ap.add_argument("--cache", type=Path, required=True,
                    help="cache folder: .deb files go to CACHE/debs, unpacked packages to CACHE/root/PKG")
    ap.add_argument("--out", type=Path, required=True,
                    help="output folder: each package's pages are written as OUT/PKG/<path>.txt")
    ap.add_argument("--html-subdir", default="", metavar="PATH",
                    help="folder inside each unpacked package to take pages from, e.g. "
                         "usr/share/doc/python3.11/html (default: the whole package); output paths "
                         "are relative to it; a package without it is warned about and skipped")
    ap.add_argument("--force", action="store_true",
                    help="parse every page again even when its .txt is newer than its HTML")
    args = ap.parse_args(argv)
    packages = list(dict.fromkeys(args.packages + (LIBRARY_DOC_PACKAGES if args.library_docs else [])))
    if not packages:
        ap.error("no package given (name some PKG or use --library-docs)")

    totals = [0, 0, 0]
    start = time.time()
    for pkg, root in download(packages, args.cache).items():
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
