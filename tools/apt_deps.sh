#!/bin/sh
# Install the Debian packages that building KenLM needs (tools/build_kenlm.py), but only when
# running as root on a Debian-like system and one of them is missing: a fresh CI machine then
# needs no other setup. Otherwise do nothing; build_kenlm.py names what is missing.
set -eu
PACKAGES="build-essential cmake libboost-program-options-dev libboost-system-dev \
libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev"
[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null || exit 0
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "apt_deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
