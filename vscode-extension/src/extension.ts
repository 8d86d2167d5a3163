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
  needsRestart,
  patchConfigurationResult,
  probeLaunch,
  readSettings,
  recheckArguments,
  resolveInterpreter,
  serverLaunch,
  serverSettings,
  withTimeout,
} from "./config";
import { runProbe } from "./probe";

const PYTHON_EXTENSION_ID = "ms-python.python";
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

async function interpreterFromPythonExtension(): Promise<string | undefined> {
  const envs = (await pythonExtensionApi())?.environments;
  const active = envs?.getActiveEnvironmentPath?.(activeResource());
  if (!active?.path) return undefined;
  // The active path can be an environment folder rather than an executable; resolving gives the
  // binary, and undefined for an environment that no longer exists.
  const resolved = envs?.resolveEnvironment ? await envs.resolveEnvironment(active) : undefined;
  return resolved?.executable?.uri?.fsPath;
}

/** Owns the language client; start/stop/restart are queued so overlapping requests never race. */
class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: InterpreterChoice | undefined;
  private queue: Promise<void> = Promise.resolve();

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

  dispose(): void {
    void this.stop();
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
    const choice = await resolveInterpreter({
      setting: settings.interpreter,
      trusted,
      workspaceFolders: workspaceFolderPaths(),
      homeDir: os.homedir(),
      platform: process.platform,
      // Asked only when grist.interpreter is empty or unusable; in restricted mode an answer inside the
      // workspace (a project .venv) is dropped by resolveInterpreter.
      pythonExtension: interpreterFromPythonExtension,
    });
    this.interpreter = choice;
    for (const s of choice.skipped) this.output.appendLine(`Interpreter candidate skipped: ${s}`);
    this.output.appendLine(`Interpreter: ${choice.command} (from ${choice.source})`);
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
    } catch (err) {
      const message = `GRIST: the language server failed to start: ${err instanceof Error ? err.message : String(err)}`;
      this.output.appendLine(message);
      void this.reportStartFailure(message);
    }
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
    const setInterpreter = "Set interpreter";
    const showOutput = "Show output";
    const picked = await vscode.window.showErrorMessage(message, setInterpreter, showOutput);
    if (picked === setInterpreter) {
      await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
    } else if (picked === showOutput) {
      this.output.show(true);
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
    // Restricted settings (interpreter, dynamic.enable, entries) take their workspace values only
    // once trusted, so the interpreter itself may change: a new process is the only safe answer.
    vscode.workspace.onDidGrantWorkspaceTrust(() => ctl.restart("workspace trusted")),
    vscode.workspace.onDidChangeConfiguration((e) => {
      const changed = (key: SettingKey) => e.affectsConfiguration(`${SECTION}.${key}`);
      if (needsRestart(changed)) void ctl.restart("settings changed");
    }),
  );
  void watchPythonExtension(context, ctl);
  return { serverReady: ctl.start() };
}

async function watchPythonExtension(context: vscode.ExtensionContext, ctl: ServerController): Promise<void> {
  try {
    const event = (await pythonExtensionApi())?.environments?.onDidChangeActiveEnvironmentPath;
    if (!event) return;
    context.subscriptions.push(
      event(() => {
        if (ctl.interpreterSource === "python-extension" || ctl.interpreterSource === "default") {
          void ctl.restart("the Python extension's interpreter changed");
        }
      }),
    );
  } catch {
    // Without the Python extension there is nothing to follow; resolution already fell back.
  }
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
