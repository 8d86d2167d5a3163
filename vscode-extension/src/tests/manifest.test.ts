// package.json is the contract with VS Code: settings the code reads but the manifest does not
// declare are silently untyped and undocumented, and restricted settings that are not declared are
// not restricted at all. These tests read the real manifest and sources.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { COMMANDS, DEFAULTS, SECTION, SETTING_KEYS, readSettings } from "../config";

// Compiled to out/tests/, so the extension folder is two levels up.
const ROOT = path.resolve(__dirname, "..", "..");
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const properties: Record<string, { default?: unknown; description?: string; markdownDescription?: string }> =
  manifest.contributes.configuration.properties;

function defaultOf(key: string): unknown {
  let value: unknown = DEFAULTS;
  for (const part of key.split(".")) value = (value as Record<string, unknown>)[part];
  return value;
}

/** The shipped sources: src/*.ts (tests and the smoke script live in subfolders). */
function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => path.join(dir, e.name));
}

describe("package.json", () => {
  it("declares every setting the code reads, and no others", () => {
    const declared = Object.keys(properties).sort();
    const read = SETTING_KEYS.map((k) => `${SECTION}.${k}`).sort();
    assert.deepEqual(declared, read);
  });

  it("gives each setting a description and the default the code uses", () => {
    for (const key of SETTING_KEYS) {
      const prop = properties[`${SECTION}.${key}`];
      assert.ok(prop.description || prop.markdownDescription, `${key} has no description`);
      assert.deepEqual(prop.default, defaultOf(key), `default of ${key}`);
    }
  });

  it("has defaults that readSettings accepts unchanged", () => {
    const fromManifest = readSettings((key) => properties[`${SECTION}.${key}`].default);
    assert.deepEqual(fromManifest, DEFAULTS);
  });

  it("only names grist settings and commands in the sources that the manifest declares", () => {
    const known = new Set([...Object.keys(properties), ...Object.values(COMMANDS)]);
    const files = sourceFiles(path.join(ROOT, "src"));
    assert.deepEqual(files.map((f) => path.basename(f)).sort(), ["config.ts", "extension.ts", "probe.ts"]);
    for (const file of files) {
      const text = fs.readFileSync(file, "utf8");
      for (const m of text.matchAll(/["'`](grist\.[A-Za-z.]+)["'`]/g)) {
        assert.ok(known.has(m[1]), `${path.basename(file)} uses undeclared "${m[1]}"`);
      }
    }
  });

  it("lets User and Remote settings both set the interpreter (window scope, not machine-overridable)", () => {
    // machine(-overridable) settings from the User tab are ignored in remote windows (code-server,
    // SSH, WSL, containers): the first window of a fresh profile then started the wrong Python.
    assert.equal((properties[`${SECTION}.interpreter`] as { scope?: string }).scope, "window");
  });

  it("builds a source map and ships it in the .vsix", () => {
    assert.match(manifest.scripts.build, /--sourcemap/);
    const ignore = fs.readFileSync(path.join(ROOT, ".vscodeignore"), "utf8").split("\n");
    assert.ok(ignore.includes("!dist/extension.js.map"), ".vscodeignore drops the source map");
  });

  it("lints before testing (eslint flat config)", () => {
    assert.ok(fs.existsSync(path.join(ROOT, "eslint.config.mjs")));
    assert.match(manifest.scripts.pretest, /npm run lint/);
  });

  it("restricts the settings that could make an untrusted workspace run code", () => {
    const trust = manifest.capabilities.untrustedWorkspaces;
    assert.equal(trust.supported, "limited");
    assert.ok(trust.description);
    assert.deepEqual([...trust.restrictedConfigurations].sort(), ["grist.dynamic.enable", "grist.entries", "grist.interpreter"]);
    for (const key of trust.restrictedConfigurations) assert.ok(properties[key], `${key} is not declared`);
  });

  it("contributes exactly the commands the extension registers, with titles", () => {
    const commands: { command: string; title: string }[] = manifest.contributes.commands;
    assert.deepEqual(commands.map((c) => c.command).sort(), Object.values(COMMANDS).sort());
    for (const c of commands) assert.ok(c.title, `${c.command} has no title`);
    const recheck = commands.find((c) => c.command === COMMANDS.recheck);
    assert.equal(`${(recheck as { category?: string }).category}: ${recheck?.title}`, "GRIST: Re-check this file");
  });

  it("activates on Python files and Jupyter notebooks and loads the bundle the build writes", () => {
    assert.deepEqual(manifest.activationEvents, ["onLanguage:python", "onNotebook:jupyter-notebook"]);
    assert.equal(manifest.main, "./dist/extension.js");
    assert.match(manifest.scripts.build, /--outfile=dist\/extension\.js/);
    assert.match(manifest.scripts.build, /--external:vscode/);
  });

  it("targets VS Code 1.82 with matching API typings (vsce rejects newer typings)", () => {
    assert.equal(manifest.engines.vscode, "^1.82.0");
    assert.match(manifest.devDependencies["@types/vscode"], /^[~^]?1\.82\./);
    assert.match(manifest.dependencies["vscode-languageclient"], /^[~^]?9\./);
    assert.match(manifest.devDependencies["@vscode/vsce"], /^[~^]?3\./);
  });

  it("carries what vsce needs to package without prompting", () => {
    for (const field of ["name", "publisher", "version", "license", "repository", "displayName", "description"]) {
      assert.ok(manifest[field], `${field} missing`);
    }
    assert.equal(manifest.name, "grist-lsp");
    assert.ok(fs.existsSync(path.join(ROOT, "LICENSE")), "LICENSE missing");
    assert.ok(fs.existsSync(path.join(ROOT, "README.md")), "README.md missing");
  });
});
