// Runs the interpreter once before starting the language client: the client library's own
// failure for a missing module is a generic "server crashed" loop, while this gives the user the
// interpreter's stderr and a precise message. No `vscode` import, so the tests run it for real.

import { spawn } from "child_process";
import type { Launch, ProbeResult } from "./config";

export function runProbe(launch: Launch, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const finish = (r: Omit<ProbeResult, "stdout" | "stderr">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, stdout, stderr });
    };
    const child = spawn(launch.command, launch.args, {
      cwd: launch.options.cwd,
      env: launch.options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    // `finish` reads `timer` only from the child's events, which fire after this line has run.
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill();
    }, timeoutMs);
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (err: NodeJS.ErrnoException) => finish({ spawnError: err.code ?? err.message, exitCode: null }));
    child.on("close", (code, signal) => finish({ exitCode: code, signal, timedOut }));
  });
}
