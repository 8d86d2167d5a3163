// Decisions the extension makes from plain data: which interpreter runs the server, how it is
// started, and what the server is told. Kept free of `vscode` imports so that `node --test` can
// exercise every branch without an editor.

import * as path from "path";

export const SECTION = "grist";

/** Setting keys under `grist.`; package.json must declare exactly these (checked by the tests). */
export const SETTING_KEYS = [
  "enable",
  "interpreter",
  "dynamic.enable",
  "dynamic.debounce",
  "dynamic.timeout",
  "budget",
  "entries",
  "showPossible",
  "showSafe",
  "reproducerDir",
  "trace.server",
] as const;
export type SettingKey = (typeof SETTING_KEYS)[number];

/** Commands contributed in package.json and registered by the extension itself. */
export const COMMANDS = {
  recheck: "grist.recheck",
  restartServer: "grist.restartServer",
  showOutput: "grist.showOutput",
  showStartProblem: "grist.showStartProblem",
} as const;

/** The LSP `workspace/executeCommand` name the server handles for a re-check. */
export const SERVER_RECHECK_COMMAND = "grist.recheck";

export type TraceLevel = "off" | "messages" | "verbose";

export interface GristSettings {
  enable: boolean;
  interpreter: string;
  dynamic: { enable: boolean; debounce: number; timeout: number };
  budget: number;
  entries: string[];
  showPossible: boolean;
  showSafe: boolean;
  reproducerDir: string;
  trace: { server: TraceLevel };
}

export const DEFAULTS: GristSettings = {
  enable: true,
  interpreter: "",
  // The same defaults as grist_lsp/defaults.py (tests/test_defaults.py compares package.json with it).
  dynamic: { enable: true, debounce: 1, timeout: 30 },
  budget: 5,
  entries: [],
  showPossible: true,
  showSafe: false,
  reproducerDir: "tests/grist",
  trace: { server: "off" },
};

/** Reads one setting key (e.g. "dynamic.enable"); `undefined` when unset or unknown. */
export type SettingReader = (key: SettingKey) => unknown;

// Settings files are hand-edited JSON: a wrong type must fall back to the default rather than
// reach the server as, say, a string budget.
function bool(value: unknown, fallback: boolean): boolean {
  return typeof value === "boolean" ? value : fallback;
}

function seconds(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : fallback;
}

// A program needs some time to start: 0 would fail every run, so it falls back like a wrong type.
function positiveSeconds(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

export function readSettings(read: SettingReader): GristSettings {
  const entries = read("entries");
  const interpreter = read("interpreter");
  const trace = read("trace.server");
  const reproducerDir = read("reproducerDir");
  return {
    enable: bool(read("enable"), DEFAULTS.enable),
    interpreter: typeof interpreter === "string" ? interpreter.trim() : DEFAULTS.interpreter,
    dynamic: {
      enable: bool(read("dynamic.enable"), DEFAULTS.dynamic.enable),
      debounce: seconds(read("dynamic.debounce"), DEFAULTS.dynamic.debounce),
      timeout: positiveSeconds(read("dynamic.timeout"), DEFAULTS.dynamic.timeout),
    },
    budget: seconds(read("budget"), DEFAULTS.budget),
    entries: Array.isArray(entries)
      ? entries.filter((e): e is string => typeof e === "string" && e.trim() !== "").map((e) => e.trim())
      : [...DEFAULTS.entries],
    showPossible: bool(read("showPossible"), DEFAULTS.showPossible),
    showSafe: bool(read("showSafe"), DEFAULTS.showSafe),
    reproducerDir:
      typeof reproducerDir === "string" && reproducerDir.trim() !== "" ? reproducerDir.trim() : DEFAULTS.reproducerDir,
    trace: {
      server: trace === "messages" || trace === "verbose" || trace === "off" ? trace : DEFAULTS.trace.server,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Interpreter resolution

export type InterpreterSource = "setting" | "python-environments" | "python-extension" | "default";

export interface InterpreterChoice {
  command: string;
  source: InterpreterSource;
  /** Candidates passed over, and why; shown in the output channel so a user can see the order. */
  skipped: string[];
}

export interface ResolveContext {
  /** `grist.interpreter` as VS Code returns it (already user-level only when untrusted). */
  setting: string;
  trusted: boolean;
  /** Absolute paths of the workspace folders; the first one anchors relative paths. */
  workspaceFolders: string[];
  homeDir: string;
  platform: NodeJS.Platform;
  /** Asks the Python extension for its selected interpreter; only called when the setting is empty. */
  pythonExtension: () => Promise<string | undefined>;
  /**
   * Asks the Python Environments extension (ms-python.vscode-python-envs), when its API is there,
   * for the environment of the workspace; asked before the Python extension, which defers to it.
   */
  pythonEnvironments?: () => Promise<string | undefined>;
}

export function defaultInterpreter(platform: NodeJS.Platform): string {
  // Windows installs `python.exe`; `python3` there is usually the Microsoft Store stub.
  return platform === "win32" ? "python" : "python3";
}

function pathApi(platform: NodeJS.Platform): path.PlatformPath {
  return platform === "win32" ? path.win32 : path.posix;
}

/** True when `p` names a file by path rather than a bare command looked up on PATH. */
function looksLikePath(p: string, platform: NodeJS.Platform): boolean {
  return p.includes("/") || (platform === "win32" && p.includes("\\"));
}

export function isInside(file: string, folders: string[], platform: NodeJS.Platform): boolean {
  const api = pathApi(platform);
  const norm = (p: string) => (platform === "win32" ? api.resolve(p).toLowerCase() : api.resolve(p));
  const target = norm(file);
  return folders.some((folder) => {
    const rel = api.relative(norm(folder), target);
    return rel === "" || (!rel.startsWith("..") && !api.isAbsolute(rel));
  });
}

/**
 * Expands `~` and `${workspaceFolder}` and anchors relative paths at the first workspace folder.
 * Returns a reason string instead when the value must not be used.
 */
export function expandInterpreterSetting(
  value: string,
  ctx: Pick<ResolveContext, "trusted" | "workspaceFolders" | "homeDir" | "platform">,
): { command: string } | { rejected: string } {
  const api = pathApi(ctx.platform);
  const folder = ctx.workspaceFolders[0];
  let v = value;
  const mentionsWorkspace = v.includes("${workspaceFolder}");
  if (mentionsWorkspace) {
    if (!folder) return { rejected: `"${value}" uses \${workspaceFolder} but no folder is open` };
    v = v.split("${workspaceFolder}").join(folder);
  }
  if (v === "~" || v.startsWith("~/") || (ctx.platform === "win32" && v.startsWith("~\\"))) {
    v = api.join(ctx.homeDir, v.slice(1));
  }
  if (!looksLikePath(v, ctx.platform)) return { command: v };
  if (!api.isAbsolute(v)) {
    if (!folder) return { rejected: `"${value}" is a relative path but no folder is open` };
    v = api.resolve(folder, v);
  }
  // An untrusted workspace may ship its own "python": running it would execute the workspace's code.
  if (!ctx.trusted && isInside(v, ctx.workspaceFolders, ctx.platform)) {
    return { rejected: `"${value}" lies inside the untrusted workspace` };
  }
  return { command: v };
}

export async function resolveInterpreter(ctx: ResolveContext): Promise<InterpreterChoice> {
  const skipped: string[] = [];
  if (ctx.setting !== "") {
    const expanded = expandInterpreterSetting(ctx.setting, ctx);
    if ("command" in expanded) return { command: expanded.command, source: "setting", skipped };
    skipped.push(`grist.interpreter: ${expanded.rejected}`);
  }
  const providers: [string, InterpreterSource, (() => Promise<string | undefined>) | undefined][] = [
    ["Python Environments extension", "python-environments", ctx.pythonEnvironments],
    ["Python extension", "python-extension", ctx.pythonExtension],
  ];
  for (const [name, source, ask] of providers) {
    if (!ask) continue;
    let found: string | undefined;
    try {
      found = await ask();
    } catch (err) {
      skipped.push(`${name}: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    if (!found) {
      skipped.push(`${name}: no interpreter selected (or extension not installed)`);
    } else if (!ctx.trusted && isInside(found, ctx.workspaceFolders, ctx.platform)) {
      skipped.push(`${name}: ${found} lies inside the untrusted workspace`);
    } else {
      return { command: found, source, skipped };
    }
  }
  return { command: defaultInterpreter(ctx.platform), source: "default", skipped };
}

/**
 * Where "Set interpreter" takes the user: the settings tab whose value this window applies.
 * In a remote window (SSH, WSL, containers, code-server) that is the Remote tab; in a trusted
 * local workspace the Workspace tab (the project's own environment); otherwise User settings.
 * (`grist.interpreter` has "window" scope, so a User value applies in remote windows as well.)
 */
export function interpreterSettingsCommand(ctx: { remoteName: string | undefined; trusted: boolean; hasFolder: boolean }): {
  command: string;
  args: unknown[];
} {
  const query = `${SECTION}.interpreter`;
  if (ctx.remoteName) return { command: "workbench.action.openRemoteSettings", args: [query] };
  if (ctx.trusted && ctx.hasFolder) return { command: "workbench.action.openWorkspaceSettings", args: [query] };
  return { command: "workbench.action.openSettings", args: [query] };
}

/**
 * After a settings change or an interpreter change elsewhere: start again when the interpreter
 * resolves to something else than what runs now, or when the last start failed and there is a
 * new candidate or a reason to try again (the user may have just installed grist-lsp there).
 */
export function shouldRestartFor(now: { command: string | undefined; running: boolean }, next: string, retry: boolean): boolean {
  if (now.command !== next) return true;
  return !now.running && retry;
}

// ---------------------------------------------------------------------------------------------
// Starting the server

export interface LaunchContext {
  trusted: boolean;
  workspaceFolders: string[];
  /** The extension's install folder: holds no Python modules, so it is a harmless cwd. */
  extensionDir: string;
  /** The environment the server inherits (the extension host's). */
  env: Record<string, string | undefined>;
}

export interface Launch {
  command: string;
  args: string[];
  /** `env` is complete when present: the client library passes it to spawn as is, unmerged. */
  options: { cwd: string; env?: Record<string, string | undefined> };
}

export const SERVER_ARGS = ["-m", "grist_lsp"];

function launchOptions(ctx: LaunchContext): Launch["options"] {
  if (ctx.trusted && ctx.workspaceFolders[0]) {
    // The dynamic engine runs the user's program, which may open files relative to the project.
    return { cwd: ctx.workspaceFolders[0] };
  }
  // `python -m` and `-c` put the cwd first on sys.path, and Windows looks up executables in the cwd:
  // with the workspace as cwd a file like `grist_lsp.py` or `python.exe` in it would run.
  // PYTHONSAFEPATH (3.11+) also stops the prepend; older interpreters ignore it.
  return { cwd: ctx.extensionDir, env: { ...ctx.env, PYTHONSAFEPATH: "1" } };
}

export function serverLaunch(interpreter: string, ctx: LaunchContext): Launch {
  return { command: interpreter, args: [...SERVER_ARGS], options: launchOptions(ctx) };
}

// `-m grist_lsp` needs `grist_lsp/__main__.py`, which an old or partial install may lack even
// though `import grist_lsp` succeeds, so the probe checks both and prints the version for the log.
export const PROBE_SCRIPT = [
  "import importlib.util, sys",
  "import grist_lsp",
  "if importlib.util.find_spec('grist_lsp.__main__') is None:",
  "    sys.exit('grist_lsp ' + getattr(grist_lsp, '__version__', '?') + ' at ' + grist_lsp.__file__ + ' cannot be run with -m grist_lsp (no __main__ module); upgrade grist-lsp')",
  "print(getattr(grist_lsp, '__version__', 'unknown'), sys.version.split()[0], sys.executable)",
].join("\n");

export function probeLaunch(interpreter: string, ctx: LaunchContext): Launch {
  return { command: interpreter, args: ["-c", PROBE_SCRIPT], options: launchOptions(ctx) };
}

export interface ProbeResult {
  /** Spawn error code such as ENOENT or EACCES, when the process never ran. */
  spawnError?: string;
  exitCode: number | null;
  signal?: string | null;
  timedOut?: boolean;
  stdout: string;
  stderr: string;
}

/** `undefined` when the interpreter can run the server; otherwise a one-line message for the user. */
export function describeProbeFailure(interpreter: string, r: ProbeResult): string | undefined {
  if (r.spawnError === "ENOENT") {
    return `GRIST: Python interpreter "${interpreter}" was not found. Set "grist.interpreter" to a Python that has grist-lsp installed.`;
  }
  if (r.spawnError) {
    return `GRIST: could not start "${interpreter}" (${r.spawnError}). Set "grist.interpreter" to a Python that has grist-lsp installed.`;
  }
  if (r.timedOut) {
    return `GRIST: "${interpreter} -c 'import grist_lsp'" did not finish in time. See the GRIST output for details.`;
  }
  if (r.exitCode === 0) return undefined;
  if (/No module named '?grist_lsp'?/.test(r.stderr)) {
    return `GRIST: grist-lsp is not installed in "${interpreter}". Run "${interpreter} -m pip install grist-lsp" or set "grist.interpreter".`;
  }
  const lastLine = r.stderr.trim().split(/\r?\n/).pop() ?? "";
  const how = r.exitCode === null ? `was killed (${r.signal ?? "signal"})` : `exited with code ${r.exitCode}`;
  return `GRIST: "${interpreter}" cannot run grist_lsp: it ${how}${lastLine ? `: ${lastLine}` : ""}. See the GRIST output for details.`;
}

// ---------------------------------------------------------------------------------------------
// What the server is told

/**
 * The settings object the server receives: as `initializationOptions`, as
 * `workspace/didChangeConfiguration` `settings.grist`, and as the `workspace/configuration` result
 * for section "grist". One shape everywhere so the server needs one parser.
 */
export interface ServerSettings {
  enable: boolean;
  dynamic: { enable: boolean; debounce: number; timeout: number };
  budget: number;
  entries: string[];
  showPossible: boolean;
  showSafe: boolean;
  reproducerDir: string;
  workspaceTrusted: boolean;
}

export function serverSettings(s: GristSettings, trusted: boolean): ServerSettings {
  return {
    enable: s.enable,
    // The server is expected to honour workspaceTrusted itself; turning the switch off here too
    // means a server that forgets still runs no workspace code.
    dynamic: { enable: trusted && s.dynamic.enable, debounce: s.dynamic.debounce, timeout: s.dynamic.timeout },
    budget: s.budget,
    entries: [...s.entries],
    showPossible: s.showPossible,
    showSafe: s.showSafe,
    reproducerDir: s.reproducerDir,
    workspaceTrusted: trusted,
  };
}

export function initializationOptions(s: GristSettings, trusted: boolean): ServerSettings {
  return serverSettings(s, trusted);
}

/**
 * Answers a `workspace/configuration` request: items asking for section "grist" get the
 * trust-adjusted settings, a dotted section below it gets that field of them; other sections keep what VS Code
 * answered.
 */
export function patchConfigurationResult(
  sections: (string | undefined)[],
  answered: unknown[],
  settings: ServerSettings,
): unknown[] {
  return sections.map((section, i) => {
    if (section === SECTION) return settings;
    if (section?.startsWith(SECTION + ".")) {
      let value: unknown = settings;
      for (const part of section.slice(SECTION.length + 1).split(".")) {
        if (value === null || typeof value !== "object" || !(part in value)) return answered[i];
        value = (value as Record<string, unknown>)[part];
      }
      return value;
    }
    return answered[i];
  });
}

/**
 * Server-advertised commands the client library should not register as VS Code commands, because
 * the extension registers them itself (registering one id twice makes the client fail to start).
 */
export function commandsToAutoRegister(advertised: readonly string[] | undefined): string[] {
  const own = new Set<string>(Object.values(COMMANDS));
  return (advertised ?? []).filter((c) => !own.has(c));
}

/**
 * Settings whose change needs a new server process rather than a configuration notification.
 * (`trace.server` needs neither: the client library re-reads it on every configuration change.)
 */
export function needsRestart(changed: (key: SettingKey) => boolean): boolean {
  return changed("interpreter") || changed("enable");
}

/** Arguments for the server's `grist.recheck`: the caller's own arguments, else the active file. */
export function recheckArguments(given: unknown[], activeUri: string | undefined): unknown[] | undefined {
  if (given.length > 0 && given[0] !== undefined) return given;
  return activeUri === undefined ? undefined : [activeUri];
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000}s`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
