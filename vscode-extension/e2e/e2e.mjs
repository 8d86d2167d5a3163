// The real-VS-Code check: the packaged .vsix installed into code-server, a buggy training
// script opened in headless Chromium, and what a user sees read back from the DOM: the
// squiggle, the hover text, the quick-fix titles. Screenshots of each step go to
// $GRIST_E2E_SHOTS (default e2e/screenshots).
//
// Run through run-e2e.sh, which installs what this needs (node 24 for code-server, Chromium).
// Environment: GRIST_PYTHON (the interpreter with grist-lsp installed), GRIST_VSIX (the
// package to install), CHROMIUM (the browser binary).

import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const python = process.env.GRIST_PYTHON || "python3";
const vsix = process.env.GRIST_VSIX || path.join(repo, "vscode-extension", "grist-lsp-0.1.0.vsix");
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = path.resolve(process.env.GRIST_E2E_SHOTS || path.join(here, "screenshots"));
const codeServer = path.join(here, "node_modules", ".bin", "code-server");

// The program under test and what the product promises about it: line 47's log is
// confirmed (an Error squiggle), with the log_softmax rewrite among the quick fixes.
const PROGRAM = "mnist_classifier.py";
const LINE = 47;
const COLUMN = 24; // inside `torch.log(probs)` on that line
const EXPECT_HOVER = /logarithm of a non-positive value/;
// A notebook (examples/classifier_notebook.ipynb): the hand-written log(softmax) is in its fifth
// cell (index 4, markdown cells counted), fourth line; the tensor it comes from is made in cell 2.
const NOTEBOOK = "classifier_notebook.ipynb";
const NOTEBOOK_CELL = 4;
const NOTEBOOK_LINE = 4;
const EXPECT_FIX = /log_softmax/;
// Static squiggles come in about a second; confirmation runs the program (torch import,
// search, replay). Generous, because CI machines are shared: a slow run is not a failure.
const CONFIRM_TIMEOUT_MS = 180_000;

function log(message) {
    console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

function prepareWorkspace(root) {
    const workspace = path.join(root, "workspace");
    const userData = path.join(root, "user-data");
    fs.mkdirSync(workspace, { recursive: true });
    fs.mkdirSync(path.join(userData, "User"), { recursive: true });
    fs.copyFileSync(path.join(repo, "examples", PROGRAM), path.join(workspace, PROGRAM));
    fs.copyFileSync(path.join(repo, "examples", NOTEBOOK), path.join(workspace, NOTEBOOK));
    const settings = {
        "grist.interpreter": python,
        // The first-run pages and the trust prompt would cover the editor.
        "security.workspace.trust.enabled": false,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "workbench.enableExperiments": false,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": false,
        "editor.hover.delay": 100,
        "chat.disableAIFeatures": true,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
    };
    fs.writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify(settings, null, 2));
    return { workspace, userData, extensions: path.join(root, "extensions") };
}

function installExtension(dirs) {
    const args = ["--user-data-dir", dirs.userData, "--extensions-dir", dirs.extensions, "--install-extension", vsix];
    const result = spawnSync(codeServer, args, { encoding: "utf8" });
    if (result.status !== 0) {
        throw new Error(`code-server --install-extension ${vsix} failed:\n${result.stdout}\n${result.stderr}`);
    }
    log(`installed ${path.basename(vsix)}`);
}

async function startCodeServer(dirs, port) {
    const args = [
        "--auth", "none",
        "--bind-addr", `127.0.0.1:${port}`,
        "--user-data-dir", dirs.userData,
        "--extensions-dir", dirs.extensions,
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-workspace-trust",
        dirs.workspace,
    ];
    const child = spawn(codeServer, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
        if (child.exitCode !== null) {
            throw new Error(`code-server exited with ${child.exitCode}:\n${output}`);
        }
        try {
            const response = await fetch(`http://127.0.0.1:${port}/healthz`);
            if (response.ok) {
                return { child, output: () => output };
            }
        } catch {
            // not listening yet
        }
        await new Promise((r) => setTimeout(r, 500));
    }
    child.kill();
    throw new Error(`code-server did not answer on port ${port} within 60 s:\n${output}`);
}

async function shot(page, name) {
    const file = path.join(shots, `${name}.png`);
    await page.screenshot({ path: file });
    log(`screenshot ${file}`);
}

async function keys(page, ...combo) {
    for (const key of combo.slice(0, -1)) await page.keyboard.down(key);
    await page.keyboard.press(combo[combo.length - 1]);
    for (const key of combo.slice(0, -1).reverse()) await page.keyboard.up(key);
}

// Everything goes through the command palette's input (F1: browsers keep Ctrl+Shift+P and
// Ctrl+P for themselves); its first character picks the mode: ">" a command, ":" a line.
async function quickInput(page, text) {
    await page.keyboard.press("F1");
    await page.waitForSelector(".quick-input-widget input", { visible: true });
    await keys(page, "Control", "A"); // typing replaces the ">" F1 starts with
    await page.keyboard.type(text, { delay: 10 });
    // Enter before the list has a row for the text picks nothing.
    await page.waitForSelector(".quick-input-list .monaco-list-row.focused", { visible: true, timeout: 20_000 });
    await new Promise((r) => setTimeout(r, 300));
    await page.keyboard.press("Enter");
    await new Promise((r) => setTimeout(r, 300));
}

async function runCommand(page, title) {
    await quickInput(page, `>${title}`);
}

async function goTo(page, line, column) {
    await quickInput(page, `:${line}:${column}`);
}

async function visibleText(page, selector, timeout) {
    const handle = await page.waitForSelector(selector, { visible: true, timeout });
    return handle.evaluate((el) => el.innerText);
}

async function check(page) {
    const failures = [];
    await page.waitForSelector(".monaco-workbench", { timeout: 60_000 });
    log("workbench loaded");

    // Open the program through Quick Open, as a user would.
    await quickInput(page, PROGRAM);
    await page.waitForSelector(".monaco-editor .view-lines", { visible: true });
    const opened = Date.now();
    log(`opened ${PROGRAM}`);

    try {
        await page.waitForSelector(".monaco-editor .squiggly-warning, .monaco-editor .squiggly-error", {
            timeout: 60_000,
        });
        log(`first squiggle ${((Date.now() - opened) / 1000).toFixed(1)} s after opening`);
    } catch {
        failures.push("no squiggle within 60 s of opening the file");
    }
    await shot(page, "1-opened");

    // A confirmed finding is an Error: wait for the Problems panel to list it on its line.
    await runCommand(page, "View: Focus Problems");
    let problems = "";
    const deadline = Date.now() + CONFIRM_TIMEOUT_MS;
    while (Date.now() < deadline) {
        problems = await page.evaluate(() => {
            const panel = document.querySelector(".markers-panel");
            return panel ? panel.innerText : "";
        });
        if (EXPECT_HOVER.test(problems) && new RegExp(`\\[Ln ${LINE}, Col`).test(problems)) {
            const errors = await page.$$(".markers-panel .codicon-error");
            if (errors.length > 0) break;
        }
        await new Promise((r) => setTimeout(r, 1000));
    }
    await shot(page, "2-problems");
    if (!EXPECT_HOVER.test(problems) || !new RegExp(`\\[Ln ${LINE}, Col`).test(problems)) {
        failures.push(`the Problems panel does not list the log on line ${LINE}:\n${problems}`);
    } else {
        log(`confirmed finding listed ${((Date.now() - opened) / 1000).toFixed(1)} s after opening`);
    }

    // The hover at the finding: its words, and no internal cache path.
    await page.click(".monaco-editor .view-lines");
    await goTo(page, LINE, COLUMN);
    // Only the lines in view are rendered, and the editor re-renders a frame or more after
    // the jump: the squiggle is waited for (CI caught a look made too soon), not sampled.
    try {
        await page.waitForSelector(".monaco-editor .squiggly-error", { timeout: 15_000 });
    } catch {
        failures.push("no Error squiggle (a confirmed finding) in the editor");
    }
    await runCommand(page, "Show or Focus Hover");
    let hover = "";
    try {
        hover = await visibleText(page, ".monaco-hover .hover-contents, .monaco-hover-content", 10_000);
    } catch {
        failures.push(`no hover at line ${LINE}, column ${COLUMN}`);
    }
    await shot(page, "3-hover");
    if (hover && !EXPECT_HOVER.test(hover)) failures.push(`hover text lacks ${EXPECT_HOVER}:\n${hover}`);
    if (/\.cache\/grist-lsp|payloads\//.test(hover)) failures.push(`hover shows an internal path:\n${hover}`);
    log(`hover: ${hover.split("\n")[0]}`);
    await page.keyboard.press("Escape");

    // The quick fixes at the finding.
    await goTo(page, LINE, COLUMN);
    await runCommand(page, "Quick Fix...");
    let actions = "";
    try {
        actions = await visibleText(page, ".action-widget", 15_000);
    } catch {
        failures.push(`no quick-fix menu at line ${LINE}`);
    }
    await shot(page, "4-quick-fixes");
    if (actions && !EXPECT_FIX.test(actions)) failures.push(`quick fixes lack ${EXPECT_FIX}:\n${actions}`);
    log(`quick fixes: ${actions.replace(/\n+/g, " | ")}`);
    await page.keyboard.press("Escape");
    failures.push(...(await checkNotebook(page)));
    return failures;
}

// The notebook: opened in VS Code's notebook editor (its built-in ipynb support, no kernel), the
// confirmed finding must be an Error squiggle inside the right cell's editor.
async function checkNotebook(page) {
    const failures = [];
    // A notebook renders only the cells in view: a tall window shows all five, and the panel goes.
    await runCommand(page, "View: Hide Panel");
    await page.setViewport({ width: 1400, height: 2400 });
    await quickInput(page, NOTEBOOK);
    try {
        await page.waitForSelector(".notebook-editor .cell-list-container", { visible: true, timeout: 60_000 });
    } catch {
        await shot(page, "5-notebook");
        return [`${NOTEBOOK} did not open in the notebook editor`];
    }
    const opened = Date.now();
    log(`opened ${NOTEBOOK}`);
    // The cell (its row in the notebook's list) and the line in that cell's editor of each
    // Error squiggle: the line is the rendered line whose top the squiggle shares.
    const errorsAt = () =>
        page.evaluate(() =>
            [...document.querySelectorAll(".notebook-editor .squiggly-error")].map((el) => {
                const row = el.closest(".monaco-list-row");
                const editor = el.closest(".monaco-editor");
                const top = el.getBoundingClientRect().top;
                const tops = editor
                    ? [...editor.querySelectorAll(".view-lines .view-line")].map((l) => l.getBoundingClientRect().top)
                    : [];
                tops.sort((a, b) => a - b);
                const line = tops.findIndex((t, k) => top >= t - 2 && (k + 1 === tops.length || top < tops[k + 1] - 2));
                return { cell: row ? Number(row.getAttribute("data-index")) : -1, line: line + 1 };
            }),
        );
    let errors = [];
    const deadline = Date.now() + CONFIRM_TIMEOUT_MS;
    while (Date.now() < deadline) {
        errors = await errorsAt();
        if (errors.length > 0) break;
        await new Promise((r) => setTimeout(r, 1000));
    }
    await shot(page, "5-notebook");
    const where = errors.map((e) => `cell index ${e.cell} line ${e.line}`).join(", ");
    if (errors.length === 0) {
        failures.push(`no Error squiggle (a confirmed finding) in ${NOTEBOOK}`);
    } else if (!errors.every((e) => e.cell === NOTEBOOK_CELL && e.line === NOTEBOOK_LINE)) {
        failures.push(`the notebook's Error squiggle is at ${where}, not cell index ${NOTEBOOK_CELL} line ${NOTEBOOK_LINE}`);
    } else {
        log(`confirmed squiggle at ${where}, ${((Date.now() - opened) / 1000).toFixed(1)} s after opening`);
    }
    await page.setViewport({ width: 1400, height: 900 });
    await runCommand(page, "View: Focus Problems");
    await runCommand(page, "Problems: Collapse All");
    await new Promise((r) => setTimeout(r, 500));
    const problems = await page.evaluate(() => document.querySelector(".markers-panel")?.innerText ?? "");
    if (!problems.includes(NOTEBOOK)) {
        failures.push(`the Problems panel does not list ${NOTEBOOK}:\n${problems}`);
    }
    await shot(page, "6-notebook-problems");
    return failures;
}

async function main() {
    if (!fs.existsSync(vsix)) throw new Error(`no ${vsix}: build it first (cd vscode-extension && npm run package)`);
    if (!fs.existsSync(chromium)) throw new Error(`no Chromium at ${chromium}: set CHROMIUM`);
    fs.mkdirSync(shots, { recursive: true });
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "grist-e2e-"));
    const dirs = prepareWorkspace(root);
    installExtension(dirs);
    const port = 8000 + Math.floor(Math.random() * 1000);
    const server = await startCodeServer(dirs, port);
    log(`code-server on port ${port}`);
    const browser = await puppeteer.launch({
        executablePath: chromium,
        headless: true,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        defaultViewport: { width: 1400, height: 900 },
    });
    let failures;
    try {
        const page = await browser.newPage();
        await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`, {
            waitUntil: "domcontentloaded",
        });
        try {
            failures = await check(page);
        } catch (error) {
            await shot(page, "error");
            throw error;
        }
    } finally {
        await browser.close();
        server.child.kill();
    }
    if (failures.length) {
        console.error(`\nFAILED (${failures.length}):\n- ${failures.join("\n- ")}`);
        console.error(`\ncode-server output:\n${server.output().slice(-4000)}`);
        process.exit(1);
    }
    log("passed: squiggle, hover and quick fixes as a user sees them, and the notebook's squiggle in its cell");
}

main().catch((error) => {
    console.error(error);
    process.exit(1);
});
