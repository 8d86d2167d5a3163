import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  COMMANDS,
  DEFAULTS,
  type GristSettings,
  type ResolveContext,
  type SettingKey,
  SERVER_ARGS,
  commandsToAutoRegister,
  describeProbeFailure,
  expandInterpreterSetting,
  initializationOptions,
  interpreterSettingsCommand,
  isInside,
  needsRestart,
  patchConfigurationResult,
  probeLaunch,
  readSettings,
  recheckArguments,
  resolveInterpreter,
  serverLaunch,
  serverSettings,
  shouldRestartFor,
  withTimeout,
} from "../config";

function ctx(overrides: Partial<ResolveContext> = {}): ResolveContext {
  return {
    setting: "",
    trusted: true,
    workspaceFolders: ["/work/proj"],
    homeDir: "/home/ada",
    platform: "linux",
    pythonExtension: async () => undefined,
    ...overrides,
  };
}

/** A Python-extension lookup that records whether it was asked. */
function lookup(result: string | undefined | Error) {
  const calls: number[] = [];
  const fn = async () => {
    calls.push(1);
    if (result instanceof Error) throw result;
    return result;
  };
  return { fn, calls };
}

describe("interpreter resolution order", () => {
  it("asks the Python Environments extension before the Python extension", async () => {
    const envs = lookup("/home/ada/.venvs/torch/bin/python");
    const ext = lookup("/usr/bin/python3");
    const choice = await resolveInterpreter(ctx({ pythonEnvironments: envs.fn, pythonExtension: ext.fn }));
    assert.deepEqual([choice.command, choice.source], ["/home/ada/.venvs/torch/bin/python", "python-environments"]);
    assert.equal(ext.calls.length, 0);
  });

  it("falls through to the Python extension when Python Environments has none or fails", async () => {
    for (const envs of [lookup(undefined), lookup(new Error("not activated"))]) {
      const choice = await resolveInterpreter(ctx({ pythonEnvironments: envs.fn, pythonExtension: lookup("/opt/py/bin/python").fn }));
      assert.deepEqual([choice.command, choice.source], ["/opt/py/bin/python", "python-extension"]);
      assert.match(choice.skipped[0], /^Python Environments extension: /);
    }
  });

  it("uses grist.interpreter first and never asks the Python extension", async () => {
    const ext = lookup("/opt/conda/bin/python");
    const choice = await resolveInterpreter(ctx({ setting: "/usr/bin/python3.12", pythonExtension: ext.fn }));
    assert.equal(choice.command, "/usr/bin/python3.12");
    assert.equal(choice.source, "setting");
    assert.equal(ext.calls.length, 0);
  });

  it("uses the Python extension's interpreter when the setting is empty", async () => {
    const ext = lookup("/opt/conda/envs/torch/bin/python");
    const choice = await resolveInterpreter(ctx({ pythonExtension: ext.fn }));
    assert.deepEqual([choice.command, choice.source], ["/opt/conda/envs/torch/bin/python", "python-extension"]);
    assert.equal(ext.calls.length, 1);
  });

  it("falls back to python3 when neither gives an interpreter, and says why", async () => {
    const choice = await resolveInterpreter(ctx());
    assert.deepEqual([choice.command, choice.source], ["python3", "default"]);
    assert.match(choice.skipped.join("\n"), /Python extension: no interpreter selected/);
  });

  it("falls back to `python` on Windows", async () => {
    const choice = await resolveInterpreter(ctx({ platform: "win32", workspaceFolders: ["C:\\proj"] }));
    assert.equal(choice.command, "python");
  });

  it("falls back when the Python extension throws, keeping its error for the log", async () => {
    const choice = await resolveInterpreter(ctx({ pythonExtension: lookup(new Error("activation failed")).fn }));
    assert.equal(choice.source, "default");
    assert.deepEqual(choice.skipped, ["Python extension: activation failed"]);
  });

  it("keeps a bare command name for PATH lookup", async () => {
    const choice = await resolveInterpreter(ctx({ setting: "python3.11" }));
    assert.equal(choice.command, "python3.11");
  });

  it("expands ~, ${workspaceFolder} and relative paths", () => {
    const base = { trusted: true, workspaceFolders: ["/work/proj"], homeDir: "/home/ada", platform: "linux" as const };
    assert.deepEqual(expandInterpreterSetting("~/venv/bin/python", base), { command: "/home/ada/venv/bin/python" });
    assert.deepEqual(expandInterpreterSetting("${workspaceFolder}/.venv/bin/python", base), {
      command: "/work/proj/.venv/bin/python",
    });
    assert.deepEqual(expandInterpreterSetting(".venv/bin/python", base), { command: "/work/proj/.venv/bin/python" });
    assert.ok("rejected" in expandInterpreterSetting(".venv/bin/python", { ...base, workspaceFolders: [] }));
  });

  it("in an untrusted workspace skips a setting that points into the workspace", async () => {
    const ext = lookup("/usr/local/bin/python3");
    const choice = await resolveInterpreter(
      ctx({ trusted: false, setting: "${workspaceFolder}/.venv/bin/python", pythonExtension: ext.fn }),
    );
    assert.deepEqual([choice.command, choice.source], ["/usr/local/bin/python3", "python-extension"]);
    assert.match(choice.skipped[0], /inside the untrusted workspace/);
  });

  it("in an untrusted workspace skips a Python-extension interpreter inside the workspace", async () => {
    const choice = await resolveInterpreter(
      ctx({ trusted: false, pythonExtension: lookup("/work/proj/.venv/bin/python").fn }),
    );
    assert.deepEqual([choice.command, choice.source], ["python3", "default"]);
    assert.match(choice.skipped.join("\n"), /\/work\/proj\/\.venv\/bin\/python lies inside the untrusted workspace/);
  });

  it("in an untrusted workspace still uses a Python-extension interpreter outside it", async () => {
    const choice = await resolveInterpreter(ctx({ trusted: false, pythonExtension: lookup("/opt/py/bin/python").fn }));
    assert.equal(choice.source, "python-extension");
  });

  it("decides containment by path components, not string prefixes", () => {
    assert.equal(isInside("/work/proj/.venv/bin/python", ["/work/proj"], "linux"), true);
    assert.equal(isInside("/work/project2/bin/python", ["/work/proj"], "linux"), false);
    assert.equal(isInside("/work/proj/../other/python", ["/work/proj"], "linux"), false);
    assert.equal(isInside("c:\\Proj\\venv\\python.exe", ["C:\\proj"], "win32"), true);
  });
});

describe("server launch", () => {
  const env = { PATH: "/usr/bin:/bin", HOME: "/home/ada", PYTHONPATH: "/opt/site" };
  const trustedCtx = { trusted: true, workspaceFolders: ["/work/proj"], extensionDir: "/ext/grist", env };

  it("runs `<python> -m grist_lsp` with no further arguments", () => {
    const launch = serverLaunch("/opt/py/bin/python", trustedCtx);
    assert.equal(launch.command, "/opt/py/bin/python");
    assert.deepEqual(launch.args, ["-m", "grist_lsp"]);
    assert.deepEqual(SERVER_ARGS, ["-m", "grist_lsp"]);
  });

  it("runs in the workspace folder, inheriting the environment, when trusted", () => {
    assert.deepEqual(serverLaunch("python3", trustedCtx).options, { cwd: "/work/proj" });
  });

  it("runs outside the workspace, with PYTHONSAFEPATH added to the full environment, when untrusted", () => {
    // The client library hands `env` to spawn unmerged: a partial env would lose PATH and PYTHONPATH.
    const options = serverLaunch("python3", { ...trustedCtx, trusted: false }).options;
    assert.deepEqual(options, { cwd: "/ext/grist", env: { ...env, PYTHONSAFEPATH: "1" } });
    assert.deepEqual(env, { PATH: "/usr/bin:/bin", HOME: "/home/ada", PYTHONPATH: "/opt/site" });
  });

  it("uses the extension folder when no folder is open", () => {
    assert.equal(serverLaunch("python3", { ...trustedCtx, workspaceFolders: [] }).options.cwd, "/ext/grist");
  });

  it("probes with the same interpreter and options as the server", () => {
    const probe = probeLaunch("python3", { ...trustedCtx, trusted: false });
    const server = serverLaunch("python3", { ...trustedCtx, trusted: false });
    assert.equal(probe.command, server.command);
    assert.deepEqual(probe.options, server.options);
    assert.equal(probe.args[0], "-c");
    assert.match(probe.args[1], /import grist_lsp/);
  });
});

describe("settings", () => {
  it("gives the defaults when nothing is set", () => {
    assert.deepEqual(readSettings(() => undefined), DEFAULTS);
  });

  it("reads every key and ignores values of the wrong type", () => {
    const values: Partial<Record<SettingKey, unknown>> = {
      enable: false,
      interpreter: "  /opt/py/bin/python  ",
      "dynamic.enable": "no",
      "dynamic.debounce": Number.NaN,
      "dynamic.timeout": 0,
      budget: -3,
      entries: ["train.py:main", 7, " ", "eval.py:run "],
      showPossible: false,
      showSafe: true,
      reproducerDir: "   ",
      "trace.server": "loud",
    };
    const s = readSettings((key) => values[key]);
    assert.deepEqual(s, {
      enable: false,
      interpreter: "/opt/py/bin/python",
      dynamic: { enable: true, debounce: 1, timeout: 30 },
      budget: 5,
      entries: ["train.py:main", "eval.py:run"],
      showPossible: false,
      showSafe: true,
      reproducerDir: "tests/grist",
      trace: { server: "off" },
    });
  });

  it("accepts a zero budget and a valid trace level", () => {
    const s = readSettings((key) => ({ budget: 0, "trace.server": "verbose" })[key as string]);
    assert.equal(s.budget, 0);
    assert.equal(s.trace.server, "verbose");
  });

  it("restarts the server only for interpreter or enable changes", () => {
    const only = (k: SettingKey) => (key: SettingKey) => key === k;
    assert.equal(needsRestart(only("interpreter")), true);
    assert.equal(needsRestart(only("enable")), true);
    assert.equal(needsRestart(only("budget")), false);
    assert.equal(needsRestart(only("trace.server")), false);
  });
});

describe("trust -> what the server is told", () => {
  const settings: GristSettings = {
    ...DEFAULTS,
    budget: 4,
    entries: ["train.py:main"],
    showSafe: true,
    dynamic: { enable: true, debounce: 0.5, timeout: 30 },
  };

  it("trusted: passes the settings through and says trusted", () => {
    assert.deepEqual(initializationOptions(settings, true), {
      enable: true,
      dynamic: { enable: true, debounce: 0.5, timeout: 30 },
      budget: 4,
      entries: ["train.py:main"],
      reproducerDir: "tests/grist",
      showPossible: true,
      showSafe: true,
      workspaceTrusted: true,
    });
  });

  it("untrusted: says untrusted and turns dynamic checking off", () => {
    const opts = initializationOptions(settings, false);
    assert.equal(opts.workspaceTrusted, false);
    assert.equal(opts.dynamic.enable, false);
    assert.equal(opts.dynamic.debounce, 0.5);
    assert.equal(opts.budget, 4);
  });

  it("trusted with dynamic checking disabled by the user keeps it disabled", () => {
    assert.equal(initializationOptions({ ...settings, dynamic: { enable: false, debounce: 0.5, timeout: 30 } }, true).dynamic.enable, false);
  });

  it("does not send client-only settings to the server", () => {
    const keys = Object.keys(serverSettings(settings, true));
    assert.ok(!keys.includes("interpreter"));
    assert.ok(!keys.includes("trace"));
  });

  it("answers workspace/configuration with the trust-adjusted settings", () => {
    const untrusted = serverSettings(settings, false);
    const answered = patchConfigurationResult(
      ["grist", "grist.dynamic.enable", "grist.dynamic", "python", "grist.nope", undefined],
      [{ raw: true }, true, { enable: true }, { pythonPath: "x" }, "vscode", { all: 1 }],
      untrusted,
    );
    assert.deepEqual(answered, [untrusted, false, { enable: false, debounce: 0.5, timeout: 30 }, { pythonPath: "x" }, "vscode", { all: 1 }]);
  });
});

describe("commands", () => {
  it("leaves grist.recheck to the extension and auto-registers the server's other commands", () => {
    assert.deepEqual(commandsToAutoRegister(["grist.recheck", "grist.createReproducer"]), ["grist.createReproducer"]);
    assert.deepEqual(commandsToAutoRegister(undefined), []);
  });

  it("re-checks the given document, else the active one", () => {
    assert.deepEqual(recheckArguments(["file:///a.py"], "file:///b.py"), ["file:///a.py"]);
    assert.deepEqual(recheckArguments([], "file:///b.py"), ["file:///b.py"]);
    assert.deepEqual(recheckArguments([undefined], "file:///b.py"), ["file:///b.py"]);
    assert.equal(recheckArguments([], undefined), undefined);
  });

  it("names every command under grist.", () => {
    for (const id of Object.values(COMMANDS)) assert.match(id, /^grist\.[a-zA-Z]+$/);
  });
});

describe("probe failure messages", () => {
  const ok = { exitCode: 0, stdout: "0.1.0 3.11.7 /usr/bin/python3\n", stderr: "" };

  it("is silent when the probe succeeded", () => {
    assert.equal(describeProbeFailure("python3", ok), undefined);
  });

  it("names a missing interpreter", () => {
    const msg = describeProbeFailure("/nope/python", { ...ok, exitCode: null, spawnError: "ENOENT" });
    assert.match(msg ?? "", /"\/nope\/python" was not found/);
  });

  it("says how to install grist-lsp when the module is missing", () => {
    const stderr = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'grist_lsp'\n";
    const msg = describeProbeFailure("/opt/py/bin/python", { ...ok, exitCode: 1, stderr });
    assert.match(msg ?? "", /not installed in "\/opt\/py\/bin\/python".*-m pip install grist-lsp/);
  });

  it("quotes the last stderr line for other failures", () => {
    const msg = describeProbeFailure("python3", { ...ok, exitCode: 1, stderr: "Traceback\nImportError: libtorch.so missing\n" });
    assert.match(msg ?? "", /exited with code 1: ImportError: libtorch.so missing/);
  });

  it("reports a timeout", () => {
    const msg = describeProbeFailure("python3", { ...ok, exitCode: null, timedOut: true });
    assert.match(msg ?? "", /did not finish in time/);
  });
});

describe("withTimeout", () => {
  it("passes a prompt result through", async () => {
    assert.equal(await withTimeout(Promise.resolve(3), 1000, "x"), 3);
  });

  it("rejects a promise that never settles, naming what was waited for", async () => {
    await assert.rejects(withTimeout(new Promise(() => undefined), 10, "Python extension"), /Python extension did not answer/);
  });
});

describe("when the interpreter is resolved again", () => {
  it("restarts when it resolves elsewhere, or to retry a failed start when asked to", () => {
    assert.equal(shouldRestartFor({ command: "python3", running: true }, "/venv/bin/python", false), true);
    assert.equal(shouldRestartFor({ command: "python3", running: true }, "python3", true), false);
    assert.equal(shouldRestartFor({ command: "python3", running: false }, "python3", false), false);
    assert.equal(shouldRestartFor({ command: "python3", running: false }, "python3", true), true);
    assert.equal(shouldRestartFor({ command: undefined, running: false }, "python3", false), true);
  });

  it("opens the settings tab this window applies: Remote, else Workspace when trusted, else User", () => {
    const remote = interpreterSettingsCommand({ remoteName: "ssh-remote", trusted: true, hasFolder: true });
    assert.deepEqual(remote, { command: "workbench.action.openRemoteSettings", args: ["grist.interpreter"] });
    const workspace = interpreterSettingsCommand({ remoteName: undefined, trusted: true, hasFolder: true });
    assert.equal(workspace.command, "workbench.action.openWorkspaceSettings");
    for (const c of [{ trusted: false, hasFolder: true }, { trusted: true, hasFolder: false }]) {
      assert.equal(interpreterSettingsCommand({ remoteName: undefined, ...c }).command, "workbench.action.openSettings");
    }
  });
});
