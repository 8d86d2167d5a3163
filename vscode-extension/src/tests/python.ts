// The tests run a real Python: GRIST_TEST_PYTHON if set, else python3 or python from PATH (CI
// images differ in which one they have). Returned as an absolute path so shell wrappers and
// Python-extension fakes can point at it too.
import * as fs from "node:fs";
import * as path from "node:path";

export function onPath(command: string): string | undefined {
  if (path.isAbsolute(command)) return fs.existsSync(command) ? command : undefined;
  const exts = process.platform === "win32" ? (process.env.PATHEXT ?? ".EXE").split(";") : [""];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    for (const ext of exts) {
      const candidate = path.join(dir, command + ext);
      if (dir && fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
    }
  }
  return undefined;
}

export function testPython(): string {
  const wanted = process.env.GRIST_TEST_PYTHON;
  const found = wanted ? onPath(wanted) : (onPath("python3") ?? onPath("python"));
  if (!found) {
    throw new Error(`no Python for the tests: ${wanted ? `GRIST_TEST_PYTHON=${wanted} not found` : "neither python3 nor python is on PATH"}`);
  }
  return found;
}
