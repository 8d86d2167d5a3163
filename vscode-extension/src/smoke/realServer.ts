// Smoke check of the shipped bundle (dist/extension.js) against the project's real server:
// `npm run smoke` (needs `npm run build` and a Python with grist-lsp and torch installed; set
// GRIST_SMOKE_PYTHON to pick it). Not part of `npm test`, whose tests must not depend on the server.
// Exits non-zero, printing the GRIST output, when any expectation fails.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Uri, state, vscodeModule } from "../tests/fakeVscode";

const ROOT = path.resolve(__dirname, "..", "..");
const BUNDLE = path.join(ROOT, "dist", "extension.js");
const PYTHON = process.env.GRIST_SMOKE_PYTHON ?? "python3";
const DYNAMIC_TIMEOUT_MS = Number(process.env.GRIST_SMOKE_TIMEOUT_MS ?? 180_000);

const BUGGY = `import torch


def f(x):
    return torch.log(x)
`;

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Module = require("node:module") as { _load: (request: string, ...rest: unknown[]) => unknown };
const originalLoad = Module._load;
Module._load = function (request: string, ...rest: unknown[]) {
  return request === "vscode" ? vscodeModule : originalLoad.call(this, request, ...rest);
};

interface Published {
  uri: string;
  diagnostics: { line: number; severity: number; message: string }[];
}
// vscode.DiagnosticSeverity
const ERROR = 0;
const WARNING = 1;
// 0-based line of torch.log in BUGGY.
const LOG_LINE = 4;
const published: Published[] = [];
const languages = (vscodeModule as unknown as { languages: { createDiagnosticCollection: (n: string) => unknown } }).languages;
const createCollection = languages.createDiagnosticCollection;
languages.createDiagnosticCollection = (name: string) => {
  type D = { message: string; severity: number; range: { start: { line: number } } };
  const collection = createCollection(name) as { set: (u: Uri, d: D[]) => unknown };
  const set = collection.set;
  collection.set = (uri, diagnostics) => {
    const flat = (diagnostics ?? []).map((d) => ({ line: d.range.start.line, severity: d.severity, message: d.message }));
    published.push({ uri: uri.toString(), diagnostics: flat });
    return set(uri, diagnostics);
  };
  return collection;
};

async function until<T>(what: string, probe: () => T | undefined, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms / 1000}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function run(trusted: boolean, workspace: string): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const extension = require(BUNDLE) as typeof import("../extension");
  state.reset();
  published.length = 0;
  state.trusted = trusted;
  state.workspaceFolders = [{ uri: Uri.file(workspace), name: "smoke", index: 0 }];
  state.settings.set("grist.interpreter", PYTHON);
  const file = Uri.file(path.join(workspace, "buggy.py"));
  const docs = (vscodeModule as unknown as { workspace: { textDocuments: unknown[] } }).workspace.textDocuments;
  docs.length = 0;
  docs.push({ uri: file, languageId: "python", version: 1, getText: () => BUGGY, isClosed: false, fileName: file.fsPath });
  const context = { subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file(ROOT), extensionPath: ROOT };
  try {
    await extension.activate(context as never).serverReady;
    if (state.messages.length) throw new Error(`unexpected message: ${state.messages[0].text}`);
    const status = (await state.commands.get("grist.status")?.()) as { trusted: boolean; dynamic_allowed: boolean };
    if (status.trusted !== trusted || status.dynamic_allowed !== trusted) {
      throw new Error(`server status ${JSON.stringify(status)} does not match trusted=${trusted}`);
    }
    const on = (severity: number) => () =>
      published
        .filter((p) => p.uri === file.toString())
        .flatMap((p) => p.diagnostics)
        .find((d) => d.line === LOG_LINE && d.severity === severity);
    const possible = await until("a possible-bug warning on torch.log", on(WARNING), 60_000);
    console.log(`${trusted ? "trusted" : "untrusted"}: static: ${possible.message}`);
    if (trusted) {
      const confirmed = await until("a confirmed-bug error on torch.log", on(ERROR), DYNAMIC_TIMEOUT_MS);
      console.log(`trusted: confirmed: ${confirmed.message}`);
    } else {
      // Give a (wrongly) started dynamic run time to report before declaring none happened.
      await new Promise((r) => setTimeout(r, 5000));
      if (on(ERROR)()) throw new Error("untrusted workspace got a confirmed bug: code was run");
    }
  } finally {
    await extension.deactivate();
    for (const d of context.subscriptions) d.dispose();
  }
}

async function main(): Promise<void> {
  if (!fs.existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run npm run build first`);
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "grist-smoke-"));
  try {
    fs.writeFileSync(path.join(workspace, "buggy.py"), BUGGY);
    await run(false, workspace);
    await run(true, workspace);
    console.log("smoke: ok");
  } finally {
    fs.rmSync(workspace, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`smoke: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    console.error(state.output.join("\n"));
    process.exit(1);
  },
);
