// Runs the real probe script against a real Python with throwaway grist_lsp packages, so the
// messages users see are checked against actual interpreter output rather than guessed stderr.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Launch, describeProbeFailure, probeLaunch } from "../config";
import { runProbe } from "../probe";
import { testPython } from "./python";

const PYTHON = testPython();

let root: string;
let extensionDir: string;
let workspace: string;

function writePackage(dir: string, files: Record<string, string>): void {
  fs.mkdirSync(path.join(dir, "grist_lsp"), { recursive: true });
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, "grist_lsp", name), text);
}

/** `-S` keeps the machine's own site-packages (which may hold the real grist_lsp) out of the way. */
function isolated(launch: Launch, pythonPath?: string): Launch {
  const env = { ...(launch.options.env ?? process.env), PYTHONPATH: pythonPath ?? "" };
  return { ...launch, args: ["-S", ...launch.args], options: { ...launch.options, env } };
}

describe("interpreter probe against a real Python", () => {
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "grist-probe-"));
    extensionDir = path.join(root, "extension");
    workspace = path.join(root, "workspace");
    fs.mkdirSync(extensionDir);
    fs.mkdirSync(workspace);
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it("accepts an installed grist_lsp with a __main__ module and reports its version", async () => {
    const site = path.join(root, "good");
    writePackage(site, { "__init__.py": "__version__ = '9.8.7'\n", "__main__.py": "" });
    const launch = probeLaunch(PYTHON, { trusted: true, workspaceFolders: [workspace], extensionDir, env: process.env });
    const r = await runProbe(isolated(launch, site), 60_000);
    assert.equal(describeProbeFailure(PYTHON, r), undefined, r.stderr);
    assert.match(r.stdout, /^9\.8\.7 \d+\.\d+/);
  });

  it("rejects a grist_lsp that cannot be run with -m", async () => {
    const site = path.join(root, "nomain");
    writePackage(site, { "__init__.py": "__version__ = '0.0.1'\n" });
    const launch = probeLaunch(PYTHON, { trusted: true, workspaceFolders: [workspace], extensionDir, env: process.env });
    const r = await runProbe(isolated(launch, site), 60_000);
    assert.notEqual(r.exitCode, 0);
    assert.match(describeProbeFailure(PYTHON, r) ?? "", /no __main__ module/);
  });

  it("tells the user to install grist-lsp when the module is absent", async () => {
    const launch = probeLaunch(PYTHON, { trusted: true, workspaceFolders: [workspace], extensionDir, env: process.env });
    const r = await runProbe(isolated(launch), 60_000);
    assert.match(describeProbeFailure(PYTHON, r) ?? "", /grist-lsp is not installed in/);
  });

  it("names an interpreter that does not exist", async () => {
    const missing = path.join(root, "no-such-python");
    const r = await runProbe(probeLaunch(missing, { trusted: true, workspaceFolders: [], extensionDir, env: process.env }), 10_000);
    assert.equal(r.spawnError, "ENOENT");
    assert.match(describeProbeFailure(missing, r) ?? "", /was not found/);
  });

  it("does not import a grist_lsp planted in an untrusted workspace", async () => {
    const planted = path.join(workspace, "planted-marker");
    writePackage(workspace, {
      "__init__.py": `open(${JSON.stringify(planted)}, "w").close()\n__version__ = 'planted'\n`,
      "__main__.py": "",
    });
    const untrusted = probeLaunch(PYTHON, { trusted: false, workspaceFolders: [workspace], extensionDir, env: process.env });
    const r = await runProbe(isolated(untrusted), 60_000);
    assert.equal(fs.existsSync(planted), false, "the workspace's grist_lsp ran");
    assert.match(describeProbeFailure(PYTHON, r) ?? "", /not installed/);

    // The same folder, trusted, is the cwd and its package is found: the protection above is
    // what made the difference.
    const trusted = probeLaunch(PYTHON, { trusted: true, workspaceFolders: [workspace], extensionDir, env: process.env });
    const t = await runProbe(isolated(trusted), 60_000);
    assert.match(t.stdout, /^planted /);
    assert.equal(fs.existsSync(planted), true);
  });
});
