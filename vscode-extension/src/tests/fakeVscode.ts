// A stand-in for the `vscode` module, just deep enough for activate() and vscode-languageclient's
// start/stop to run under plain node: the real editor cannot be downloaded in CI here. The parts
// the extension's behaviour depends on (settings, trust, commands, messages, output) are real
// implementations that record what happened; everything else the client library merely touches
// is an inert stub.

import * as path from "node:path";

type Listener<T> = (e: T) => unknown;

export class Disposable {
  constructor(private readonly onDispose: () => void = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.onDispose();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  readonly event = (listener: Listener<T>, thisArg?: unknown, disposables?: Disposable[]): Disposable => {
    const bound: Listener<T> = (e) => listener.call(thisArg, e);
    this.listeners.add(bound);
    const d = new Disposable(() => this.listeners.delete(bound));
    disposables?.push(d);
    return d;
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) l(e);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
    readonly query = "",
    readonly fragment = "",
  ) {}
  static file(p: string): Uri {
    return new Uri("file", "", path.resolve(p));
  }
  static parse(value: string): Uri {
    const u = new URL(value);
    return new Uri(u.protocol.replace(/:$/, ""), u.host, decodeURIComponent(u.pathname), u.search.replace(/^\?/, ""), u.hash.replace(/^#/, ""));
  }
  get fsPath(): string {
    return this.path;
  }
  with(change: Partial<Pick<Uri, "scheme" | "authority" | "path" | "query" | "fragment">>): Uri {
    return new Uri(change.scheme ?? this.scheme, change.authority ?? this.authority, change.path ?? this.path, change.query ?? this.query, change.fragment ?? this.fragment);
  }
  toString(): string {
    const encoded = this.path.split("/").map(encodeURIComponent).join("/");
    return `${this.scheme}://${this.authority}${encoded}${this.query ? "?" + this.query : ""}${this.fragment ? "#" + this.fragment : ""}`;
  }
  toJSON(): unknown {
    return { scheme: this.scheme, authority: this.authority, path: this.path, query: this.query, fragment: this.fragment };
  }
}

export class CancellationError extends Error {}

export class CancellationTokenSource {
  private emitter = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    this.start = typeof a === "number" ? new Position(a, b as number) : a;
    this.end = typeof a === "number" ? new Position(c as number, d as number) : (b as Position);
  }
}

export class Diagnostic {
  source?: string;
  code?: unknown;
  tags?: number[];
  constructor(
    readonly range: Range,
    readonly message: string,
    readonly severity: number = 0,
  ) {}
}

export class CodeActionKind {
  static readonly Empty = new CodeActionKind("");
  static readonly QuickFix = new CodeActionKind("quickfix");
  static readonly Source = new CodeActionKind("source");
  constructor(readonly value: string) {}
  append(part: string): CodeActionKind {
    return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
  }
  contains(other: CodeActionKind): boolean {
    return this.value === "" || other.value === this.value || other.value.startsWith(this.value + ".");
  }
  intersects(other: CodeActionKind): boolean {
    return this.contains(other) || other.contains(this);
  }
}

export interface Message {
  level: "error" | "warning" | "info";
  text: string;
  buttons: string[];
}

/** A progress notification: `open` until the extension's task settles (or the user cancels it). */
export interface Notification {
  title: string;
  messages: string[];
  open: boolean;
  cancel(): void;
}

/** A status bar item as the extension last left it. */
export interface StatusItem {
  text: string;
  tooltip: unknown;
  command: unknown;
  backgroundColor: unknown;
  name: string;
  visible: boolean;
}

/** Everything a test can steer or inspect. */
export const state = {
  settings: new Map<string, unknown>(),
  trusted: true,
  workspaceFolders: [] as { uri: Uri; name: string; index: number }[],
  output: [] as string[],
  messages: [] as Message[],
  /** Button a test wants "clicked" on the next message; undefined dismisses it. */
  answer: undefined as string | undefined,
  notifications: [] as Notification[],
  statusItems: [] as StatusItem[],
  /** Label a test wants picked in the next quick pick; undefined dismisses it. */
  pick: undefined as string | undefined,
  quickPicks: [] as { labels: string[]; descriptions: string[]; placeHolder?: string }[],
  /** `vscode.env.remoteName`: "ssh-remote", "wsl", ... in a remote window, undefined locally. */
  remoteName: undefined as string | undefined,
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  extensions: new Map<string, unknown>(),
  activeTextEditor: undefined as { document: { uri: Uri; languageId: string } } | undefined,
  onDidChangeConfiguration: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  onDidGrantWorkspaceTrust: new EventEmitter<void>(),
  reset(): void {
    this.settings.clear();
    this.trusted = true;
    this.workspaceFolders = [];
    this.output.length = 0;
    this.messages.length = 0;
    this.answer = undefined;
    this.notifications.length = 0;
    this.statusItems.length = 0;
    this.pick = undefined;
    this.quickPicks.length = 0;
    this.remoteName = undefined;
    this.commands.clear();
    this.executed.length = 0;
    this.extensions.clear();
    this.activeTextEditor = undefined;
  },
  /** Changes settings and tells listeners, as VS Code does after settings.json is saved. */
  changeSettings(values: Record<string, unknown>): void {
    for (const [k, v] of Object.entries(values)) this.settings.set(k, v);
    const keys = Object.keys(values);
    this.onDidChangeConfiguration.fire({
      affectsConfiguration: (section) => keys.some((k) => k === section || k.startsWith(section + ".")),
    });
  },
};

function configuration(section: string | undefined) {
  const prefix = section ? section + "." : "";
  const lookup = (key: string): unknown => {
    const full = prefix + key;
    if (state.settings.has(full)) return state.settings.get(full);
    // Reading a whole object (e.g. "grist" or "grist.dynamic") gathers the dotted keys beneath it.
    let found = false;
    const obj: Record<string, unknown> = {};
    for (const [k, v] of state.settings) {
      if (!k.startsWith(full + ".")) continue;
      found = true;
      let cur = obj;
      const parts = k.slice(full.length + 1).split(".");
      for (const p of parts.slice(0, -1)) cur = (cur[p] ??= {}) as Record<string, unknown>;
      cur[parts[parts.length - 1]] = v;
    }
    return found ? obj : undefined;
  };
  return {
    get: (key: string, fallback?: unknown) => lookup(key) ?? fallback,
    has: (key: string) => lookup(key) !== undefined,
    inspect: () => undefined,
    update: async () => undefined,
  };
}

const noopDisposable = () => new Disposable();
const event = () => (_l: unknown, _t?: unknown, ds?: Disposable[]) => {
  const d = new Disposable();
  ds?.push(d);
  return d;
};

/** Inert namespace members: `onX` are events, `registerX`/`createX` hand back disposables. */
function namespace<T extends object>(real: T): T {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop in target) return Reflect.get(target, prop, receiver);
      if (typeof prop !== "string") return undefined;
      if (prop.startsWith("on")) return event();
      if (prop.startsWith("register")) return noopDisposable;
      if (prop.startsWith("create")) return () => ({ dispose() {}, onDidCreate: event(), onDidChange: event(), onDidDelete: event() });
      return undefined;
    },
  });
}

async function show(level: Message["level"], text: string, ...rest: unknown[]): Promise<string | undefined> {
  const buttons = rest.filter((r): r is string => typeof r === "string");
  state.messages.push({ level, text, buttons });
  const answer = state.answer;
  state.answer = undefined;
  return answer !== undefined && buttons.includes(answer) ? answer : undefined;
}

const fake: Record<string, unknown> = {
  version: "1.82.0",
  Disposable,
  EventEmitter,
  Uri,
  CancellationError,
  CancellationTokenSource,
  Position,
  Range,
  Diagnostic,
  CodeActionKind,
  DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
  DiagnosticTag: { Unnecessary: 1, Deprecated: 2 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  StatusBarAlignment: { Left: 1, Right: 2 },
  ThemeColor: class ThemeColor {
    constructor(readonly id: string) {}
  },
  env: {
    language: "en",
    appName: "fake-vscode",
    machineId: "test",
    sessionId: "test",
    openExternal: async () => true,
    get remoteName() {
      return state.remoteName;
    },
  },
  workspace: namespace({
    getConfiguration: configuration,
    get isTrusted() {
      return state.trusted;
    },
    get workspaceFolders() {
      return state.workspaceFolders.length ? state.workspaceFolders : undefined;
    },
    textDocuments: [],
    notebookDocuments: [],
    onDidChangeConfiguration: state.onDidChangeConfiguration.event,
    onDidGrantWorkspaceTrust: state.onDidGrantWorkspaceTrust.event,
    applyEdit: async () => true,
  }),
  window: namespace({
    get activeTextEditor() {
      return state.activeTextEditor;
    },
    visibleTextEditors: [],
    tabGroups: { all: [], onDidChangeTabs: event(), onDidChangeTabGroups: event() },
    createOutputChannel: (name: string) => ({
      name,
      append: (t: string) => state.output.push(t),
      appendLine: (t: string) => state.output.push(t),
      replace: (t: string) => state.output.splice(0, state.output.length, t),
      clear: () => (state.output.length = 0),
      show: () => undefined,
      hide: () => undefined,
      dispose: () => undefined,
    }),
    showErrorMessage: (t: string, ...r: unknown[]) => show("error", t, ...r),
    showWarningMessage: (t: string, ...r: unknown[]) => show("warning", t, ...r),
    showInformationMessage: (t: string, ...r: unknown[]) => show("info", t, ...r),
    withProgress: async (options: { location: number; title?: string }, task: (p: unknown, t: unknown) => unknown) => {
      const source = new CancellationTokenSource();
      const shown: Notification = { title: options.title ?? "", messages: [], open: true, cancel: () => source.cancel() };
      if (options.location === 15) state.notifications.push(shown);
      try {
        return await task({ report: (r: { message?: string }) => r.message && shown.messages.push(r.message) }, source.token);
      } finally {
        shown.open = false;
      }
    },
    createStatusBarItem: () => {
      const item: StatusItem = { text: "", tooltip: undefined, command: undefined, backgroundColor: undefined, name: "", visible: false };
      state.statusItems.push(item);
      return Object.assign(item, {
        show: () => (item.visible = true),
        hide: () => (item.visible = false),
        dispose: () => (item.visible = false),
      });
    },
    showQuickPick: async (items: { label: string; description?: string }[], options?: { placeHolder?: string }) => {
      state.quickPicks.push({ labels: items.map((i) => i.label), descriptions: items.map((i) => i.description ?? ""), placeHolder: options?.placeHolder });
      const wanted = state.pick;
      state.pick = undefined;
      return items.find((i) => i.label === wanted);
    },
  }),
  commands: namespace({
    registerCommand(id: string, fn: (...args: unknown[]) => unknown) {
      // VS Code refuses a second registration of an id; the client library would fail to start.
      if (state.commands.has(id)) throw new Error(`command '${id}' already exists`);
      state.commands.set(id, fn);
      return new Disposable(() => state.commands.delete(id));
    },
    async executeCommand(id: string, ...args: unknown[]) {
      state.executed.push({ id, args });
      return state.commands.get(id)?.(...args);
    },
  }),
  languages: namespace({
    match: () => 10,
    createDiagnosticCollection: (name: string) => {
      const entries = new Map<string, unknown>();
      return {
        name,
        set: (uri: Uri, d: unknown) => entries.set(uri.toString(), d),
        delete: (uri: Uri) => entries.delete(uri.toString()),
        clear: () => entries.clear(),
        forEach: () => undefined,
        get: (uri: Uri) => entries.get(uri.toString()),
        has: (uri: Uri) => entries.has(uri.toString()),
        dispose: () => entries.clear(),
      };
    },
  }),
  extensions: namespace({
    getExtension: (id: string) => state.extensions.get(id),
  }),
};

/** The module object handed to `require("vscode")`: unknown classes become empty classes. */
export const vscodeModule = new Proxy(fake, {
  get(target, prop) {
    if (prop in target) return target[prop as string];
    if (typeof prop === "string" && /^[A-Z]/.test(prop)) {
      const cls = class {};
      target[prop] = cls;
      return cls;
    }
    return undefined;
  },
});
