// Drives activate() end to end under node: the real vscode-languageclient starts a real process
// through `<python> -m grist_lsp`, where grist_lsp is a small recording LSP server written below
// (the project's own server is not needed). What the server receives is what is asserted.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { EventEmitter, Uri, state, vscodeModule } from "./fakeVscode";
import { testPython } from "./python";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Module = require("node:module") as { _load: (request: string, ...rest: unknown[]) => unknown };
const originalLoad = Module._load;
Module._load = function (request: string, ...rest: unknown[]) {
  return request === "vscode" ? vscodeModule : originalLoad.call(this, request, ...rest);
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require("../extension") as typeof import("../extension");

const PYTHON = testPython();

// Speaks just enough LSP: answers initialize/shutdown/executeCommand, asks the client for the
// "grist" configuration once initialized, and appends every message it receives (and the answer
// to its own request) to $GRIST_FAKE_LOG as one JSON line tagged with its pid.
const FAKE_SERVER = String.raw`
import json, os, sys
LOG = os.environ["GRIST_FAKE_LOG"]
inp, out = sys.stdin.buffer, sys.stdout.buffer

def log(msg):
    with open(LOG, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "cwd": os.getcwd(), "msg": msg}) + "\n")

def send(msg):
    body = json.dumps(msg).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()

def read():
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(inp.read(length))

while True:
    msg = read()
    if msg is None:
        break
    log(msg)
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {
            "textDocumentSync": 1,
            "executeCommandProvider": {"commands": ["grist.recheck", "grist.createReproducer"]},
        }, "serverInfo": {"name": "fake-grist"}}})
    elif method == "initialized":
        send({"jsonrpc": "2.0", "id": "cfg", "method": "workspace/configuration",
              "params": {"items": [{"section": "grist"}, {"section": "grist.dynamic.enable"}]}})
    elif method == "exit":
        break
    elif "id" in msg and method is not None:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
`;

let root: string;
let site: string;
let workspace: string;
let extensionDir: string;
let logFile: string;
const savedEnv = { PYTHONPATH: process.env.PYTHONPATH, GRIST_FAKE_LOG: process.env.GRIST_FAKE_LOG };

interface Logged {
  pid: number;
  cwd: string;
  msg: { method?: string; id?: unknown; params?: Record<string, unknown>; result?: unknown };
}

function logged(): Logged[] {
  if (!fs.existsSync(logFile)) return [];
  const lines = fs.readFileSync(logFile, "utf8").split("\n");
  // A server may be part-way through writing a line (an initialize is ~5 kB, more than a page):
  // only the lines it finished, each ended by its newline, are read; the rest is read next poll.
  lines.pop();
  return lines.filter(Boolean).map((l) => JSON.parse(l) as Logged);
}

async function until<T>(what: string, probe: () => T | undefined, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) {
      assert.fail(`timed out waiting for ${what}; server log:\n${fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : "(none)"}\noutput:\n${state.output.join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Another path to the test Python (a shell wrapper: PYTHON may itself be a pyenv shim script). */
function pythonWrapper(name: string, flags = ""): string {
  const wrapper = path.join(root, name);
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec ${JSON.stringify(PYTHON)} ${flags}"$@"\n`, { mode: 0o755 });
  return wrapper;
}

function withMethod(method: string, pid?: number): Logged[] {
  return logged().filter((l) => l.msg.method === method && (pid === undefined || l.pid === pid));
}

type Context = Parameters<typeof extension.activate>[0];

// The contexts activated and not yet deactivated: a test that fails part-way leaves its language
// client and server running, which would log into the next test's file and keep node's event loop
// (and so `npm test`) alive for ever. afterEach deactivates what is left.
const live = new Set<Context>();

function context(): Context {
  const ctx = {
    subscriptions: [] as { dispose(): unknown }[],
    extensionUri: Uri.file(extensionDir),
    extensionPath: extensionDir,
  } as unknown as Context;
  live.add(ctx);
  return ctx;
}

async function deactivate(ctx: Context): Promise<void> {
  live.delete(ctx);
  await extension.deactivate();
  for (const d of ctx.subscriptions) d.dispose();
}

describe("activate() with a recording language server", () => {
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "grist-activate-"));
    site = path.join(root, "site");
    workspace = path.join(root, "workspace");
    extensionDir = path.join(root, "extension");
    for (const d of [site, workspace, extensionDir, path.join(site, "grist_lsp")]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(site, "grist_lsp", "__init__.py"), "__version__ = '0.0.0-fake'\n");
    fs.writeFileSync(path.join(site, "grist_lsp", "__main__.py"), FAKE_SERVER);
    fs.writeFileSync(path.join(workspace, "model.py"), "import torch\n");
    logFile = path.join(root, "server.log");
    process.env.PYTHONPATH = site;
    process.env.GRIST_FAKE_LOG = logFile;
  });
  after(() => {
    for (const [k, v] of Object.entries(savedEnv)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(root, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const ctx of [...live]) await deactivate(ctx);
  });
  beforeEach(() => {
    state.reset();
    fs.rmSync(logFile, { force: true });
    state.workspaceFolders = [{ uri: Uri.file(workspace), name: "workspace", index: 0 }];
  });

  it("untrusted: static only, outside the workspace; trusting restarts with code execution allowed", async () => {
    state.trusted = false;
    state.settings.set("grist.interpreter", PYTHON);
    state.settings.set("grist.budget", 5);
    const ctx = context();
    await extension.activate(ctx).serverReady;

    const init = await until("initialize", () => withMethod("initialize")[0]);
    const opts = init.msg.params?.initializationOptions as Record<string, unknown>;
    assert.deepEqual(opts, {
      enable: true,
      dynamic: { enable: false, debounce: 1, timeout: 30 },
      budget: 5,
      entries: [],
      showPossible: true,
      showSafe: false,
      reproducerDir: "tests/grist",
      workspaceTrusted: false,
    });
    assert.equal(fs.realpathSync(init.cwd), fs.realpathSync(extensionDir), "untrusted server must not run in the workspace");

    // The server asked for its configuration: the answer is trust-adjusted too.
    const answer = await until("configuration answer", () => logged().find((l) => l.msg.id === "cfg"));
    assert.deepEqual(answer.msg.result, [opts, false]);

    // Our grist.recheck and the client's auto-registered server command coexist.
    for (const id of ["grist.recheck", "grist.restartServer", "grist.showOutput", "grist.createReproducer"]) {
      assert.ok(state.commands.has(id), `${id} not registered`);
    }

    state.trusted = true;
    state.onDidGrantWorkspaceTrust.fire();
    const second = await until("second initialize", () => withMethod("initialize").find((l) => l.pid !== init.pid));
    assert.deepEqual((second.msg.params?.initializationOptions as { dynamic: unknown }).dynamic, { enable: true, debounce: 1, timeout: 30 });
    assert.equal((second.msg.params?.initializationOptions as { workspaceTrusted: unknown }).workspaceTrusted, true);
    assert.equal(fs.realpathSync(second.cwd), fs.realpathSync(workspace));
    await until("first server shut down", () => withMethod("exit", init.pid)[0]);

    await deactivate(ctx);
    await until("second server shut down", () => withMethod("exit", second.pid)[0]);
  });

  it("re-check sends the active file to the server; setting changes reach it", async () => {
    state.settings.set("grist.interpreter", PYTHON);
    const file = Uri.file(path.join(workspace, "model.py"));
    state.activeTextEditor = { document: { uri: file, languageId: "python" } };
    const ctx = context();
    // Invoked before the server is up (activate() does not wait for it): the command waits.
    const api = extension.activate(ctx);
    await state.commands.get("grist.recheck")?.();
    await api.serverReady;
    const exec = await until("executeCommand", () => withMethod("workspace/executeCommand")[0]);
    assert.deepEqual(exec.msg.params, { command: "grist.recheck", arguments: [file.toString()] });

    // A code action's own argument wins over the active editor.
    await state.commands.get("grist.recheck")?.("file:///elsewhere/other.py");
    const second = await until("second executeCommand", () => withMethod("workspace/executeCommand")[1]);
    assert.deepEqual(second.msg.params?.arguments, ["file:///elsewhere/other.py"]);

    state.changeSettings({ "grist.showSafe": true, "grist.dynamic.enable": false });
    const change = await until("didChangeConfiguration", () =>
      withMethod("workspace/didChangeConfiguration").find(
        (l) => (l.msg.params as { settings: { grist: { showSafe: boolean } } }).settings.grist.showSafe,
      ),
    );
    assert.deepEqual(change.msg.params, {
      settings: {
        grist: {
          enable: true,
          dynamic: { enable: false, debounce: 1, timeout: 30 },
          budget: 5,
          entries: [],
          showPossible: true,
          showSafe: true,
          reproducerDir: "tests/grist",
          workspaceTrusted: true,
        },
      },
    });
    const pids = new Set(withMethod("initialize").map((l) => l.pid));
    assert.equal(pids.size, 1, "a plain settings change must not restart the server");

    await deactivate(ctx);
    await until("server shut down", () => withMethod("exit")[0]);
  });

  it("uses the Python extension's interpreter when grist.interpreter is empty, and follows its changes", async () => {
    const asked: unknown[] = [];
    const envChanged = new EventEmitter<unknown>();
    // a second environment: another path to the same Python
    const other = pythonWrapper("other-python");
    let active = path.join(root, "some-env");
    state.extensions.set("ms-python.python", {
      isActive: true,
      exports: {
        ready: Promise.resolve(),
        environments: {
          getActiveEnvironmentPath: (resource: unknown) => {
            asked.push(resource);
            return { path: active };
          },
          resolveEnvironment: async (env: { path: string }) =>
            env.path === path.join(root, "some-env")
              ? { executable: { uri: Uri.file(PYTHON) } }
              : env.path === path.join(root, "other-env")
                ? { executable: { uri: Uri.file(other) } }
                : undefined,
          onDidChangeActiveEnvironmentPath: envChanged.event,
        },
      },
    });
    const ctx = context();
    await extension.activate(ctx).serverReady;
    const first = await until("initialize", () => withMethod("initialize")[0]);
    assert.equal(asked.length, 1);
    assert.ok(
      state.output.some((l) => l.startsWith(`Interpreter: ${PYTHON} (from python-extension)`)),
      state.output.join("\n"),
    );

    // The same environment again (the Python extension fires on every selection): nothing to do.
    envChanged.fire({ path: active });
    await until("second lookup", () => asked.length === 2 || undefined);
    // The user picks another environment in the Python extension: the server is restarted with it.
    active = path.join(root, "other-env");
    envChanged.fire({ path: active });
    await until("restart after the environment changed", () => withMethod("initialize").find((l) => l.pid !== first.pid));
    assert.equal(withMethod("initialize").length, 2, "re-selecting the same environment must not restart");
    assert.ok(state.output.some((l) => l.startsWith(`Interpreter: ${other} (from python-extension)`)), state.output.join("\n"));
    await deactivate(ctx);
  });

  it("prefers the Python Environments extension's environment, and follows its changes", async () => {
    const envChanged = new EventEmitter<unknown>();
    const other = pythonWrapper("envs-python");
    let executable = PYTHON;
    state.extensions.set("ms-python.vscode-python-envs", {
      isActive: true,
      exports: {
        getEnvironment: async () => ({ execInfo: { run: { executable } } }),
        onDidChangeEnvironment: envChanged.event,
      },
    });
    state.extensions.set("ms-python.python", {
      isActive: true,
      exports: { environments: { getActiveEnvironmentPath: () => ({ path: "/nowhere/python" }) } },
    });
    const ctx = context();
    await extension.activate(ctx).serverReady;
    const first = await until("initialize", () => withMethod("initialize")[0]);
    assert.ok(state.output.some((l) => l.startsWith(`Interpreter: ${PYTHON} (from python-environments)`)), state.output.join("\n"));
    executable = other;
    envChanged.fire({});
    await until("restart with the new environment", () => withMethod("initialize").find((l) => l.pid !== first.pid));
    assert.ok(state.output.some((l) => l.startsWith(`Interpreter: ${other} (from python-environments)`)), state.output.join("\n"));
    await deactivate(ctx);
  });

  it("changing grist.interpreter restarts the server", async () => {
    state.settings.set("grist.interpreter", PYTHON);
    const ctx = context();
    await extension.activate(ctx).serverReady;
    const first = await until("initialize", () => withMethod("initialize")[0]);
    state.changeSettings({ "grist.interpreter": path.join(root, "no-such-python") });
    await until("error for the new interpreter", () => state.notifications.find((m) => /was not found/.test(m.title)));
    await until("old server shut down", () => withMethod("exit", first.pid)[0]);
    await deactivate(ctx);
  });

  it("disabled: starts no server; enabling starts it", async () => {
    state.settings.set("grist.interpreter", PYTHON);
    state.settings.set("grist.enable", false);
    const ctx = context();
    await extension.activate(ctx).serverReady;
    assert.equal(withMethod("initialize").length, 0);
    assert.ok(state.output.some((l) => l.includes('"grist.enable": false')));

    state.changeSettings({ "grist.enable": true });
    await until("initialize after enabling", () => withMethod("initialize")[0]);
    await deactivate(ctx);
  });

  it("a missing interpreter: a notice that closes itself once a later start succeeds", async () => {
    const missing = path.join(root, "no-such-python");
    state.settings.set("grist.interpreter", missing);
    const ctx = context();
    await extension.activate(ctx).serverReady;
    const [notification] = state.notifications;
    assert.match(notification.title, /was not found/);
    assert.ok(notification.open);
    const item = state.statusItems.find((i) => i.visible);
    assert.ok(item, "no status bar item while the server is down");
    assert.equal(item.command, "grist.showStartProblem");
    assert.match(String(item.tooltip), /was not found/);
    assert.equal(withMethod("initialize").length, 0);

    // With no server, re-check explains instead of failing silently.
    await state.commands.get("grist.recheck")?.();
    assert.match(state.messages[0].text, /not running/);

    // The status item's "Set interpreter" opens the tab whose value this window applies.
    state.pick = "Set interpreter";
    await state.commands.get("grist.showStartProblem")?.();
    assert.deepEqual(state.quickPicks[0].labels, ["Set interpreter", "Show output", "Try again"]);
    assert.deepEqual(state.executed.at(-1), { id: "workbench.action.openWorkspaceSettings", args: ["grist.interpreter"] });
    state.remoteName = "ssh-remote";
    state.pick = "Set interpreter";
    await state.commands.get("grist.showStartProblem")?.();
    assert.match(state.quickPicks[1].descriptions[0], /Remote settings/);
    assert.deepEqual(state.executed.at(-1), { id: "workbench.action.openRemoteSettings", args: ["grist.interpreter"] });

    // The user sets a working interpreter: the server starts and the notice goes away by itself.
    state.changeSettings({ "grist.interpreter": PYTHON });
    await until("initialize with the new interpreter", () => withMethod("initialize")[0]);
    await until("notification closed", () => !notification.open || undefined);
    await until("status item hidden", () => !item.visible || undefined);
    assert.equal(state.notifications.length, 1, "one notice, not one per attempt");
    await deactivate(ctx);
  });

  it("a failed start is retried when a python setting changes what the interpreter resolves to", async () => {
    let selected = path.join(root, "no-such-python");
    state.extensions.set("ms-python.python", {
      isActive: true,
      exports: {
        environments: {
          getActiveEnvironmentPath: () => ({ path: selected }),
          resolveEnvironment: async (env: { path: string }) => ({ executable: { uri: Uri.file(env.path) } }),
        },
      },
    });
    const ctx = context();
    await extension.activate(ctx).serverReady;
    assert.match(state.notifications[0].title, /was not found/);
    state.changeSettings({ "grist.budget": 3 }); // resolves to the same missing interpreter: no new attempt
    selected = PYTHON;
    state.changeSettings({ "python.defaultInterpreterPath": PYTHON });
    await until("initialize after the python setting changed", () => withMethod("initialize")[0]);
    await until("notice closed", () => !state.notifications[0].open || undefined);
    assert.equal(state.notifications.length, 1);
    await deactivate(ctx);
  });

  it("an interpreter without grist_lsp: the error says so and stderr goes to the output", async () => {
    process.env.PYTHONPATH = "";
    try {
      // -S hides any grist_lsp installed on this machine; a wrapper script keeps it one command.
      const wrapper = pythonWrapper("bare-python", "-S ");
      state.settings.set("grist.interpreter", wrapper);
      const ctx = context();
      await extension.activate(ctx).serverReady;
      await until("error notice", () => state.notifications[0]);
      assert.match(state.notifications[0].title, /grist-lsp is not installed in/);
      assert.ok(state.output.some((l) => /No module named 'grist_lsp'/.test(l)), state.output.join("\n"));
      await deactivate(ctx);
    } finally {
      process.env.PYTHONPATH = site;
    }
  });
});
