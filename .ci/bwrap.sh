#!/usr/bin/env bash
# Makes sure bubblewrap (bwrap) is installed and can start a sandbox here, for
# the tests of the MCP gateway's contained children (--sandbox): installed
# with apt-get when missing, then tried. Fails, saying why, when it cannot
# run: CI then sets AXGATE_TEST_SANDBOX=required, so that those tests fail
# rather than skip.
set -euo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
	echo "bwrap.sh: installing bubblewrap" >&2
	if ! apt-get install -y -o DPkg::Lock::Timeout=120 bubblewrap >/dev/null; then
		apt-get update -o DPkg::Lock::Timeout=120 >/dev/null
		apt-get install -y -o DPkg::Lock::Timeout=120 bubblewrap >/dev/null
	fi
fi
bwrap --version
# The namespaces and mounts every sandboxed child needs (childproc.FindBwrap).
bwrap --unshare-all --cap-drop ALL --die-with-parent --ro-bind / / --proc /proc --dev /dev -- true
