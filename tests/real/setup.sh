#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what tests/real needs (Debian 12): python3-numpy, redis-server,
# redis-tools. Idempotent; exit 0 when everything is present afterwards,
# 1 when it could not be installed (no root, no network, no apt).
# The postinst of redis-server may start the system redis on 127.0.0.1:6379;
# the tests never use that port (they pick a free one), so it is left alone.
set -u
need=""
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need="$need python3-numpy"
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need="$need redis-server"
{ command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; } || need="$need redis-tools"
[ -z "$need" ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "setup.sh: no apt-get; missing:$need" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
		echo "setup.sh: not root; missing:$need" >&2; exit 1; fi
else
	SUDO=""
fi
export DEBIAN_FRONTEND=noninteractive
# Do not let the package start services where policy-rc.d says not to;
# install first from the existing lists, update once only if that fails.
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $need >/dev/null 2>&1 || {
	$SUDO apt-get update -q >/dev/null 2>&1
	$SUDO apt-get install -y -q --no-install-recommends $need >/dev/null 2>&1
} || { echo "setup.sh: apt-get install$need failed" >&2; exit 1; }
exit 0
