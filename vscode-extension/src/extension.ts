import * as os from "os";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import {
  COMMANDS,
  type GristSettings,
  type InterpreterChoice,
  type LaunchContext,
  SECTION,
  SERVER_RECHECK_COMMAND,
  type SettingKey,
  commandsToAutoRegister,
  describeProbeFailure,
  initializationOptions,
  interpreterSettingsCommand,
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
} from "./config";
import { runProbe } from "./probe";

const PYTHON_EXTENSION_ID = "ms-python.python";
const PYTHON_ENVIRONMENTS_EXTENSION_ID = "ms-python.vscode-python-envs";
// Importing grist_lsp may pull in torch, which takes tens of seconds on a cold disk.
const PROBE_TIMEOUT_MS = 90_000;
const PYTHON_EXTENSION_TIMEOUT_MS = 15_000;

// Just the parts of the Python extension's exported API we touch. Declared here instead of
// depending on @vscode/python-extension because that extension is optional: everything is probed.
interface PythonEnvironmentPath {
  path?: string;
}
interface PythonExtensionApi {
  ready?: Promise<void>;
  environments?: {
    getActiveEnvironmentPath?(resource?: vscode.Uri): PythonEnvironmentPath | undefined;
    resolveEnvironment?(env: PythonEnvironmentPath | string): Promise<
      { executable?: { uri?: vscode.Uri } } | undefined
    >;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
}

// The part of the Python Environments extension's API we touch (same reasoning as above).
interface PythonEnvironmentsApi {
  getEnvironment?(scope: vscode.Uri | undefined): Promise<{ execInfo?: { run?: { executable?: string } } } | undefined>;
  onDidChangeEnvironment?: vscode.Event<unknown>;
}

function settingsNow(): GristSettings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return readSettings((key) => config.get(key));
}

function workspaceFolderPaths(): string[] {
  return (vscode.workspace.workspaceFolders ?? [])
    .filter((f) => f.uri.scheme === "file")
    .map((f) => f.uri.fsPath);
}

function activeResource(): vscode.Uri | undefined {
  return vscode.window.activeTextEditor?.document.uri ?? vscode.workspace.workspaceFolders?.[0]?.uri;
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext) return undefined;
  const api = ext.isActive ? ext.exports : await withTimeout(Promise.resolve(ext.activate()), PYTHON_EXTENSION_TIMEOUT_MS, "Python extension");
  if (api?.ready) await withTimeout(api.ready, PYTHON_EXTENSION_TIMEOUT_MS, "Python extension");
  return api;
}

async function pythonEnvironmentsApi(): Promise<PythonEnvironmentsApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonEnvironmentsApi>(PYTHON_ENVIRONMENTS_EXTENSION_ID);
  if (!ext) return undefined;
  return ext.isActive ? ext.exports : await withTimeout(Promise.resolve(ext.activate()), PYTHON_EXTENSION_TIMEOUT_MS, "Python Environments extension");
}

async function interpreterFromPythonEnvironments(): Promise<string | undefined> {
  const api = await pythonEnvironmentsApi();
  if (!api?.getEnvironment) return undefined;
  const env = await withTimeout(api.getEnvironment(activeResource()), PYTHON_EXTENSION_TIMEOUT_MS, "Python Environments extension");
  return env?.execInfo?.run?.executable || undefined;
}

async function interpreterFromPythonExtension(): Promise<string | undefined> {
  const envs = (await pythonExtensionApi())?.environments;
  const active = envs?.getActiveEnvironmentPath?.(activeResource());
  if (!active?.path) return undefined;
  // The active path can be an environment folder rather than an executable; resolving gives the
  // binary, and undefined for an environment that no longer exists.
  const resolved = envs?.resolveEnvironment ? await envs.resolveEnvironment(active) : undefined;
  return resolved?.executable?.uri?.fsPath;
}

/**
 * Why the server is not running, where the user sees it until it is: a status bar item and a
 * notification. Both are ours to close, so they disappear once a later start succeeds. (VS Code
 * cannot close a showErrorMessage toast from code: the first version left a stale one behind.)
 * The notification is a cancellable progress notification because that is the only kind an
 * extension can dismiss; its Cancel button just hides it, the status item stays.
 */
class StartProblemNotice implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private closeNotification: (() => void) | undefined;
  message: string | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
    this.item.name = "GRIST language server";
    this.item.command = COMMANDS.showStartProblem;
  }

  show(message: string): void {
    this.message = message;
    this.item.text = "$(error) GRIST";
    this.item.tooltip = `${message} Click for what to do.`;
    this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
    this.item.show();
    this.closeNotification?.();
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: message, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          progress.report({ message: 'Click "GRIST" in the status bar to set the interpreter, see the output or try again.' });
          const close = () => {
            if (this.closeNotification === close) this.closeNotification = undefined;
            resolve();
          };
          this.closeNotification = close;
          token.onCancellationRequested(close);
        }),
    );
  }

  clear(): void {
    this.message = undefined;
    this.item.hide();
    this.closeNotification?.();
  }

  dispose(): void {
    this.clear();
    this.item.dispose();
  }
}

/** Owns the language client; start/stop/restart are queued so overlapping requests never race. */
class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: InterpreterChoice | undefined;
  private queue: Promise<void> = Promise.resolve();
  readonly notice = new StartProblemNotice();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
  ) {}

  get running(): LanguageClient | undefined {
    return this.client?.isRunning() ? this.client : undefined;
  }

  get interpreterSource(): InterpreterChoice["source"] | undefined {
    return this.interpreter?.source;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  restart(reason: string): Promise<void> {
    return this.enqueue(async () => {
      this.output.appendLine(`Restarting the GRIST server: ${reason}`);
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  /**
   * Resolve the interpreter again (settings changed, or the Python extensions picked another
   * environment) and restart when it differs from the one in use, or when the last start failed
   * and `retry` says the change may have fixed it.
   */
  reresolve(reason: string, retry: boolean): Promise<void> {
    return this.enqueue(async () => {
      const settings = settingsNow();
      if (!settings.enable) return;
      const choice = await this.resolve(settings, false);
      if (!shouldRestartFor({ command: this.interpreter?.command, running: this.running !== undefined }, choice.command, retry)) {
        return;
      }
      this.output.appendLine(`Restarting the GRIST server: ${reason} (interpreter: ${choice.command}, from ${choice.source})`);
      await this.doStop();
      await this.doStart();
    });
  }

  dispose(): void {
    void this.stop();
    this.notice.dispose();
  }

  /** Settles once every start/stop/restart asked for so far has finished. */
  idle(): Promise<void> {
    return this.queue;
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    // Steps report their own expected failures; anything else is logged here so the queue (and
    // the promises handed out) never reject and one failure does not block later restarts.
    this.queue = this.queue.then(step).catch((err: unknown) => {
      this.output.appendLine(`GRIST: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    });
    return this.queue;
  }

  private launchContext(): LaunchContext {
    return {
      trusted: vscode.workspace.isTrusted,
      workspaceFolders: workspaceFolderPaths(),
      extensionDir: this.context.extensionUri.fsPath,
      env: process.env,
    };
  }

  private async doStart(): Promise<void> {
    const settings = settingsNow();
    const trusted = vscode.workspace.isTrusted;
    if (!settings.enable) {
      this.output.appendLine('GRIST is disabled ("grist.enable": false); the server is not started.');
      return;
    }
    const choice = await this.resolve(settings, true);
    this.interpreter = choice;
    if (!trusted) {
      this.output.appendLine("Workspace is not trusted: static analysis only, no code from the workspace is run.");
    }

    const ctx = this.launchContext();
    const probe = await runProbe(probeLaunch(choice.command, ctx), PROBE_TIMEOUT_MS);
    const failure = describeProbeFailure(choice.command, probe);
    if (failure) {
      this.output.appendLine(failure);
      if (probe.stderr.trim()) this.output.appendLine(probe.stderr.trimEnd());
      void this.reportStartFailure(failure);
      return;
    }
    this.output.appendLine(`grist_lsp found: ${probe.stdout.trim()}`);

    const launch = serverLaunch(choice.command, ctx);
    const serverOptions: ServerOptions = { command: launch.command, args: launch.args, options: launch.options };
    const client = new LanguageClient("grist", "GRIST", serverOptions, this.clientOptions(settings, trusted));
    this.keepOwnCommands(client);
    this.client = client;
    try {
      await client.start();
      this.notice.clear();
    } catch (err) {
      const message = `GRIST: the language server failed to start: ${err instanceof Error ? err.message : String(err)}`;
      this.output.appendLine(message);
      void this.reportStartFailure(message);
    }
  }

  private async resolve(settings: GristSettings, log: boolean): Promise<InterpreterChoice> {
    const choice = await resolveInterpreter({
      setting: settings.interpreter,
      trusted: vscode.workspace.isTrusted,
      workspaceFolders: workspaceFolderPaths(),
      homeDir: os.homedir(),
      platform: process.platform,
      // Asked only when grist.interpreter is empty or unusable; in restricted mode an answer inside the
      // workspace (a project .venv) is dropped by resolveInterpreter.
      pythonEnvironments: interpreterFromPythonEnvironments,
      pythonExtension: interpreterFromPythonExtension,
    });
    if (log) {
      for (const s of choice.skipped) this.output.appendLine(`Interpreter candidate skipped: ${s}`);
      this.output.appendLine(`Interpreter: ${choice.command} (from ${choice.source})`);
    }
    return choice;
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    try {
      if (client.needsStop()) await client.stop();
    } catch (err) {
      this.output.appendLine(`Stopping the GRIST server: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private clientOptions(settings: GristSettings, trusted: boolean): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        // The Python cells of a Jupyter notebook: the server announces notebook sync for them
        // and checks the notebook's code cells as one program; this entry gives cells the
        // quick fixes and commands a file has.
        { notebook: "jupyter-notebook", language: "python" },
      ],
      synchronize: { configurationSection: SECTION },
      initializationOptions: initializationOptions(settings, trusted),
      outputChannel: this.output,
      traceOutputChannel: this.output,
      middleware: {
        workspace: {
          // Both directions carry the same trust-adjusted shape as initializationOptions, so the
          // server never sees dynamic.enable=true in an untrusted workspace.
          didChangeConfiguration: async () => {
            const client = this.running;
            if (!client) return;
            await client.sendNotification(DidChangeConfigurationNotification.type, {
              settings: { [SECTION]: serverSettings(settingsNow(), vscode.workspace.isTrusted) },
            });
          },
          configuration: async (params, token, next) => {
            const answered = await next(params, token);
            if (!Array.isArray(answered)) return answered;
            return patchConfigurationResult(
              params.items.map((item) => item.section),
              answered,
              serverSettings(settingsNow(), vscode.workspace.isTrusted),
            );
          },
        },
      },
    };
  }

  // The client library turns every server-advertised command into a VS Code command. grist.recheck
  // is also contributed by this extension (so it works from the palette with the active file), and
  // registering one id twice would make the client fail to start; let the library skip ours.
  private keepOwnCommands(client: LanguageClient): void {
    const feature = client.getFeature(ExecuteCommandRequest.method);
    const register = feature.register.bind(feature);
    feature.register = (data) =>
      register({ ...data, registerOptions: { ...data.registerOptions, commands: commandsToAutoRegister(data.registerOptions.commands) } });
  }

  private async reportStartFailure(message: string): Promise<void> {
    this.notice.show(message);
  }

  /** "What to do" behind the status item: set the interpreter in the right tab, read the output, retry. */
  async offerFixes(): Promise<void> {
    const target = interpreterSettingsCommand({
      remoteName: vscode.env.remoteName,
      trusted: vscode.workspace.isTrusted,
      hasFolder: workspaceFolderPaths().length > 0,
    });
    const tab = vscode.env.remoteName ? "Remote" : target.command.endsWith("WorkspaceSettings") ? "Workspace" : "User";
    const choices = [
      { label: "Set interpreter", description: `grist.interpreter in ${tab} settings`, run: () => this.openInterpreterSetting(target) },
      { label: "Show output", description: "what the interpreter said", run: () => this.output.show(true) },
      { label: "Try again", description: "after installing grist-lsp", run: () => this.restart("requested") },
    ];
    const picked = await vscode.window.showQuickPick(choices, { placeHolder: this.notice.message ?? "GRIST" });
    await picked?.run();
  }

  private async openInterpreterSetting(target: { command: string; args: unknown[] }): Promise<void> {
    try {
      await vscode.commands.executeCommand(target.command, ...target.args);
    } catch {
      // Older editors (and code-server builds) without that tab's command: the settings editor
      // still finds the setting, with the scope switcher at the top.
      await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
    }
  }
}

async function recheck(controller: ServerController, output: vscode.OutputChannel, args: unknown[]): Promise<void> {
  // Invoked while the server is (re)starting, wait for it rather than report it missing.
  await controller.idle();
  const client = controller.running;
  if (!client) {
    const picked = await vscode.window.showWarningMessage("GRIST: the language server is not running.", "Show output");
    if (picked) output.show(true);
    return;
  }
  const active = vscode.window.activeTextEditor?.document;
  const activeUri = active && active.languageId === "python" ? client.code2ProtocolConverter.asUri(active.uri) : undefined;
  // From a menu VS Code passes a vscode.Uri; from a server code action the argument is already a
  // protocol URI string.
  const given = args.map((a) => (a instanceof vscode.Uri ? client.code2ProtocolConverter.asUri(a) : a));
  const commandArgs = recheckArguments(given, activeUri);
  if (!commandArgs) {
    void vscode.window.showInformationMessage("GRIST: open a Python file to re-check it.");
    return;
  }
  try {
    await client.sendRequest(ExecuteCommandRequest.type, { command: SERVER_RECHECK_COMMAND, arguments: commandArgs });
  } catch (err) {
    output.appendLine(`grist.recheck failed: ${err instanceof Error ? err.message : String(err)}`);
    void vscode.window.showErrorMessage(`GRIST: re-check failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

let controller: ServerController | undefined;

/** What activate() returns (the extension's exports). */
export interface GristExtensionApi {
  /** Settles when the first start attempt is over: server running, start failed, or disabled. */
  serverReady: Promise<void>;
}

// Activation does not wait for the server: the import probe can take many seconds (torch), and
// VS Code holds this extension's commands, "Show output" included, until activate() returns.
export function activate(context: vscode.ExtensionContext): GristExtensionApi {
  const output = vscode.window.createOutputChannel("GRIST");
  controller = new ServerController(context, output);
  const ctl = controller;
  context.subscriptions.push(
    output,
    ctl,
    vscode.commands.registerCommand(COMMANDS.recheck, (...args: unknown[]) => recheck(ctl, output, args)),
    vscode.commands.registerCommand(COMMANDS.restartServer, () => ctl.restart("requested")),
    vscode.commands.registerCommand(COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(COMMANDS.showStartProblem, () => ctl.offerFixes()),
    // Restricted settings (interpreter, dynamic.enable, entries) take their workspace values only
    // once trusted, so the interpreter itself may change: a new process is the only safe answer.
    vscode.workspace.onDidGrantWorkspaceTrust(() => ctl.restart("workspace trusted")),
    vscode.workspace.onDidChangeConfiguration((e) => {
      const changed = (key: SettingKey) => e.affectsConfiguration(`${SECTION}.${key}`);
      if (needsRestart(changed)) void ctl.restart("settings changed");
      // Any other grist or python setting may change what the interpreter resolves to (in a
      // remote window, for one, a User value now applies): resolve again, restart if it moved.
      else if (e.affectsConfiguration(SECTION) || e.affectsConfiguration("python")) {
        void ctl.reresolve("settings changed", e.affectsConfiguration("python"));
      }
    }),
  );
  void watchInterpreterChanges(context, ctl);
  return { serverReady: ctl.start() };
}

/** Follow the interpreter the Python extension, or the Python Environments extension, selects. */
async function watchInterpreterChanges(context: vscode.ExtensionContext, ctl: ServerController): Promise<void> {
  const follow = (who: string) => () => {
    if (ctl.interpreterSource !== "setting") void ctl.reresolve(`the ${who}'s interpreter changed`, true);
  };
  // Each lookup on its own: one extension failing to activate must not hide the other's events.
  await Promise.all([
    pythonExtensionApi().then(
      (api) => {
        const event = api?.environments?.onDidChangeActiveEnvironmentPath;
        if (event) context.subscriptions.push(event(follow("Python extension")));
      },
      () => undefined, // without it there is nothing to follow; resolution already fell back
    ),
    pythonEnvironmentsApi().then(
      (api) => {
        const event = api?.onDidChangeEnvironment;
        if (event) context.subscriptions.push(event(follow("Python Environments extension")));
      },
      () => undefined,
    ),
  ]);
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
