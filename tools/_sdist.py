"""Download and unpack a PyPI source archive whose sha256 is pinned here, not taken from PyPI.

Used by the install helpers that compile C/C++ from a PyPI sdist (KenLM's binaries ship in no
wheel and no Debian package): the address comes from PyPI's simple index (PEP 503), so no
mirror-specific URL is hard-coded, and the pinned checksum means a replaced archive is refused.
"""
from __future__ import annotations

import hashlib
import html
import re
import tarfile
import urllib.request
from pathlib import Path


def sdist_url(package: str, version: str) -> str:
    """The source archive's address, from PyPI's simple index."""
    with urllib.request.urlopen(f"https://pypi.org/simple/{package}/", timeout=60) as r:
        page = r.read().decode()
    name = f"{package}-{version}.tar.gz"
    for url in re.findall(r'href="([^"#]+)(?:#[^"]*)?"', page):
        if url.endswith("/" + name):
            return html.unescape(url)
    raise RuntimeError(f"{name} not on PyPI's index")


def fetch_sdist(package: str, version: str, sha256: str, dest: Path) -> Path:
    """Download ``package==version``'s sdist into ``dest``, check it, unpack it; return the tree."""
    archive = Path(dest) / f"{package}-{version}.tar.gz"
    with urllib.request.urlopen(sdist_url(package, version), timeout=300) as r:
        archive.write_bytes(r.read())
    got = hashlib.sha256(archive.read_bytes()).hexdigest()
    if got != sha256:
        raise RuntimeError(f"{archive.name}: sha256 {got}, expected {sha256}")
    with tarfile.open(archive) as t:
        t.extractall(dest, filter="data")
    return Path(dest) / f"{package}-{version}"
