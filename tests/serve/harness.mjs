// harness.mjs — what the npm-client tests share: `npm(name)` loads a package
// installed in tests/npm (unmodified from npm), `check` prints one PASS/FAIL
// line per check, `run` turns a throwing step into a FAIL line, `error` gives
// the error a promise rejects with (or null), and `finish` exits non-zero if
// any check failed.
import { createRequire } from "module";

export const npm = createRequire(new URL("../npm/package.json", import.meta.url));

let failed = 0;
export function check(name, ok, detail) {
  console.log(`${ok ? "PASS" : "FAIL"} ${name}`);
  if (!ok) { failed++; if (detail !== undefined) console.log("  " + JSON.stringify(detail).slice(0, 900)); }
}
export async function run(name, fn) {
  try { await fn(); } catch (e) { check(name, false, String(e && e.stack || e)); }
}
export async function error(p) {
  try { await p; return null; } catch (e) { return e; }
}
export function finish() {
  process.exit(failed ? 1 : 0);
}
